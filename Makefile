# The two commands of the README:
#   make book   executes every chapter on the quick profile and writes _build/html
#   make test   runs the unit tests of zslib, the book build (the integration test) and the browser tests
#               of the built pages (these need Chromium and `make mathjax`; without them they skip)
# Both create the virtual environment .venv on first use, with the exact versions of constraints.txt. The unit
# tests use the checkout's zslib (installed editable into .venv); the book build executes the chapters as a reader
# runs them, with zslib installed from its wheel into _build/reader/env (scripts/build_book.py, --zslib wheel: a
# chapter that breaks on a pip install fails the build). `make book-checkout` executes them with the checkout's.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.zslib-installed

export ZS_PROFILE ?= quick

MATHJAX_VERSION := 3.2.2
MATHJAX         := .vendor/mathjax

.PHONY: book book-checkout test test-fast test-unit env lock clean mathjax assignments

env: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if v >= (3, 10) else "Python >= 3.10 is needed (3.11 recommended), found %d.%d" % v)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[book,full,test]"
	@touch $(STAMP)

book: $(STAMP)
	$(BIN)/python scripts/build_book.py

# The same build with the checkout's zslib (editable) in the chapters' kernel: for writing a chapter.
book-checkout: $(STAMP)
	$(BIN)/python scripts/build_book.py --zslib checkout

test: $(STAMP)
	$(BIN)/python -m pytest

# The assignment pack (student notebooks without solutions, instructor notebooks, rubric, teacher's README).
ASSIGNMENTS ?= _build/assignments
assignments: $(STAMP)
	$(BIN)/python -m zslib assignments --out $(ASSIGNMENTS)

# Before every commit: the unit tests without the slow ones (marker slow) and without the book build.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not book"

# Every unit test, the slow ones included, without the book build.
test-unit: $(STAMP)
	$(BIN)/python -m pytest -m "not book"

# MathJax 3 for the browser tests: the built pages load it from a CDN, the tests answer those requests
# with this copy (the npm package, fetched with npm into the ignored folder .vendor/).
mathjax: $(MATHJAX)/es5/tex-mml-chtml.js

$(MATHJAX)/es5/tex-mml-chtml.js:
	@command -v npm >/dev/null || { echo "make mathjax needs npm (Node.js), e.g. apt-get install npm"; exit 1; }
	rm -rf $(MATHJAX) .vendor/package && mkdir -p .vendor
	cd .vendor && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar xzf mathjax-$(MATHJAX_VERSION).tgz \
	  && rm mathjax-$(MATHJAX_VERSION).tgz && mv package mathjax

# Refresh constraints.txt from the current environment (after changing dependencies).
lock: $(STAMP)
	@{ echo "# Exact versions used to build and test the book (Python 3.11, x86_64). Used as pip constraints"; \
	   echo "# by the Makefile: 'pip install -c constraints.txt -e .[book,full,test]'. Regenerate with 'make lock'."; \
	   $(BIN)/python -m pip freeze --exclude-editable | grep -v -i '^zslib'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf _build
