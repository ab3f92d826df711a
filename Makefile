# The two commands of the README:
#   make book   executes every chapter on the quick profile and writes _build/html
#   make test   runs the unit tests of zslib and the book build (the integration test)
# Both create the virtual environment .venv on first use, with the exact versions of constraints.txt.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.zslib-installed

export ZS_PROFILE ?= quick

.PHONY: book test test-unit env lock clean

env: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if v >= (3, 10) else "Python >= 3.10 is needed (3.11 recommended), found %d.%d" % v)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[book,full,test]"
	@touch $(STAMP)

book: $(STAMP)
	$(BIN)/python scripts/build_book.py

test: $(STAMP)
	$(BIN)/python -m pytest

# Only the fast unit tests (no book build).
test-unit: $(STAMP)
	$(BIN)/python -m pytest -m "not book"

# Refresh constraints.txt from the current environment (after changing dependencies).
lock: $(STAMP)
	@{ echo "# Exact versions used to build and test the book (Python 3.11, x86_64). Used as pip constraints"; \
	   echo "# by the Makefile: 'pip install -c constraints.txt -e .[book,full,test]'. Regenerate with 'make lock'."; \
	   $(BIN)/python -m pip freeze --exclude-editable | grep -v -i '^zslib'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf _build
