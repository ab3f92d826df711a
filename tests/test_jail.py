"""zslib.teaching.jail: a graded submission in Linux namespaces cannot write outside its folder, reach the
network, or leave a process behind, and the host's mounts are untouched. The jail is exercised with a shell as
the submission (a root grader drops it to ``nobody``), so the test needs root and util-linux, not a Python that
``nobody`` can run."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from zslib.teaching import grading, jail


def test_mount_points_are_decoded_once_each_parents_first():
    info = "\n".join([
        "36 35 98:0 / /mnt/with\\040space rw - ext3 /dev/root rw",
        "22 1 0:21 / / rw - ext4 /dev/sda1 rw",
        "23 22 0:22 / /proc rw - proc proc rw",
        "24 23 0:23 / /proc/sys/fs/binfmt_misc rw - binfmt_misc none rw",
        "25 22 0:24 / /tmp rw - tmpfs tmpfs rw",
        "26 22 0:24 / /tmp rw - tmpfs tmpfs rw",  # mounted twice: listed once
    ])
    assert jail.mount_points(info) == ["/", "/proc", "/tmp", "/mnt/with space", "/proc/sys/fs/binfmt_misc"]


def test_isolation_choices_and_refusals():
    assert grading.resolve_isolation("process", "nobody") == "process"
    assert grading.resolve_isolation("auto", None) == "process"  # no other user to drop to: no jail
    with pytest.raises(grading.RefusedUser, match="--isolation process"):
        grading.resolve_isolation("namespaces", None)
    with pytest.raises(ValueError, match="isolation must be one of"):
        grading.resolve_isolation("docker", "nobody")


def _jail_available():
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("bash") is None:
        return "needs a root grader with util-linux and bash"
    return grading._namespaces_problem(grading._user_ids("nobody"))


@pytest.fixture
def jailed(tmp_path):
    """Run a bash script in the jail as nobody with ``tmp_path/box`` writable; returns (stdout, box)."""
    problem = _jail_available()
    if problem:
        pytest.skip(f"the namespace jail is not available here: {problem}")
    import pwd

    nobody = pwd.getpwnam("nobody")
    box = Path(tempfile.mkdtemp(prefix="zs-jail-box-"))  # as the grader makes it: in /tmp, owned by nobody
    os.chown(box, nobody.pw_uid, nobody.pw_gid)

    def run(script: str):
        here = str(Path(jail.__file__).resolve().parents[2])
        out = subprocess.run(jail.command(str(box), nobody.pw_uid, nobody.pw_gid, ["bash", "-c", script]),
                             capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=here),
                             cwd=box)  # as the grader starts it: in its folder
        return out

    yield run, box
    shutil.rmtree(box, ignore_errors=True)


def test_the_jail_allows_its_folder_only_and_no_network(jailed, tmp_path):
    run, box = jailed
    marker = f"zs-jail-test-{os.getpid()}"
    out = run(f"""
        id -un
        echo inside > {box}/answer && echo wrote-box
        echo here > relative && echo wrote-relative
        for place in /tmp /var/tmp /dev/shm {tmp_path}; do echo x 2>/dev/null > $place/{marker} && echo wrote-$place; done
        echo x > /dev/null && echo devnull
        (exec 3<>/dev/tcp/1.1.1.1/53) 2>/dev/null && echo network
        echo pid-$$
        ls /proc | grep -c '^[0-9]'
    """)
    lines = out.stdout.split()
    assert lines[0] == "nobody" and "wrote-box" in lines and "devnull" in lines, out.stdout + out.stderr
    assert "wrote-relative" in lines  # its working directory is the writable folder, not the read-only view of it
    assert not [w for w in lines if w.startswith("wrote-/")], lines  # nothing outside its folder
    assert "network" not in lines
    assert "pid-1" in lines  # its own PID namespace: the shell is process 1
    assert int(lines[-1]) < 10  # it sees its own few processes, not the host's
    assert (box / "answer").read_text() == "inside\n"
    for place in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not Path(place, marker).exists()
    probe = Path("/tmp") / marker  # the host's /tmp is still writable: the jail changed nothing outside
    probe.write_text("host")
    probe.unlink()


def test_a_process_that_leaves_the_session_and_clears_its_environment_dies_with_the_jail(jailed):
    run, _ = jailed
    nap = "299.%d" % (os.getpid() % 1000)
    out = run(f"setsid env -i sleep {nap} < /dev/null > /dev/null 2>&1 & echo started")
    assert "started" in out.stdout, out.stderr
    time.sleep(0.5)
    survivors = subprocess.run(["pgrep", "-f", f"sleep {nap}"], capture_output=True, text=True).stdout.split()
    for pid in survivors:  # clean up before failing
        subprocess.run(["kill", "-9", pid])
    assert survivors == []


def test_a_root_grader_grades_in_the_jail_where_nobody_can_run_python(tmp_path):
    """End to end, where this machine allows it: a submission that tries the escapes earns its point, and
    leaves no file and no process behind."""
    if _jail_available():
        pytest.skip("the namespace jail is not available here")
    try:
        grading.probe_user("nobody")
    except grading.RefusedUser as err:
        pytest.skip(f"nobody cannot run this Python here ({str(err)[:80]}...)")
    from test_grading import IMPORT, SOLUTIONS, _nb

    marker = Path("/tmp") / f"zs-jail-e2e-{os.getpid()}"
    escape = (f"import subprocess; subprocess.Popen(['setsid', 'env', '-i', 'sleep', '298.5']); "
              f"open({str(marker)!r}, 'w').write('x')")
    nb = tmp_path / "nb.ipynb"
    relative = "open('written_here.txt', 'w').write('ok')"  # its working folder is writable: no error, the check runs
    nb.write_text(json.dumps(_nb([IMPORT, relative, SOLUTIONS[0], f"try:\n    {escape}\nexcept OSError:\n    pass"])))
    os.chmod(tmp_path, 0o755)
    g = grading.grade_submission(nb, {"metrics.duplicated_r1": 1}, user="nobody", timeout=300,
                                 isolation="namespaces")
    assert g.points == 1, g.status
    assert not marker.exists()
    assert subprocess.run(["pgrep", "-f", "sleep 298.5"], capture_output=True).returncode == 1


def test_the_cli_refuses_the_jail_in_one_line_where_it_cannot_run(tmp_path):
    nb = tmp_path / "tiny.ipynb"
    nb.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    here = str(Path(grading.__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-m", "zslib", "grade", str(nb), "--same-user", "--isolation", "namespaces"],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=here))
    assert out.returncode == 2 and "--isolation process" in out.stderr and "Traceback" not in out.stderr
