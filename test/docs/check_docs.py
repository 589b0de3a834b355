#!/usr/bin/env python3
"""Run the commands of README.md and docs/*.md, so that the pages stay true.

Every fenced block of a page whose language is sh, bash or console is run with bash
(set -e, pipefail), and every python block with python3 (the first of python3 in PATH and
/usr/bin/python3 that imports mpi4py and numpy), each under a time limit; a block
fails on a non-zero exit status, on a time-out, or on expected output that is missing. A
command fenced as text (or with no language) fails the check: commands are fenced as sh.

Directives, each an HTML comment on its own line directly above the block's fence (several
may stand one above the other):

  <!-- docs-check: skip REASON -->   not run; reported as "skipped: REASON", never a pass
                                     (a GPU's block: "skip needs a GPU")
  <!-- docs-check: expect REGEX -->  the block's output (stdout and stderr) must match the
                                     Python regular expression REGEX (re.search, multiline)
  <!-- docs-check: then COMMAND -->  run after the block, in the same shell: a check of what
                                     the block made (a file, its contents); its failure fails
                                     the block
  <!-- docs-check: in-copy -->       run in a copy of the build tree with a HOME of its own,
                                     made for the first such block and shared by the later
                                     ones (for the pages that configure, install and uninstall)
  <!-- docs-check: timeout SECONDS -->  the block's limit (default CGPU_DOCS_TIMEOUT, 180 s)
  <!-- docs-check: output -->        on a text block: each of its lines must be a line of the
                                     output of the last block run before it on the page, "..."
                                     matching any text
  <!-- docs-check: output, numbers vary -->  the same, any number matching any number

How the blocks run: README.md first, then docs/*.md in name order, top to bottom, from the
build tree (the repository root). HOME is a new temporary directory into which the build
tree is installed first as quickstart.sh installs it (prefix $HOME/.local, the plugin in
$HOME/.openmpi/components, where Open MPI looks by default), so the pages' commands find the
plugin and the libraries where they say, and nothing of the user's own HOME is read or
written; TMPDIR is a directory of it too. What a machine needs for mpirun to run the commands as written comes from the
environment, never from editing the commands: OMPI_MCA_rmaps_base_oversubscribe=1 (more
ranks than cores on a small machine) and, as root, OMPI_ALLOW_RUN_AS_ROOT=1 and
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1. OMPI_MCA_* variables of the caller are removed.

An in-copy block configures a copy of the built tree: the copy keeps the objects already
built, so its make rebuilds nothing that is up to date; where the build tree was configured
--with-cuda=no, a site file (CONFIG_SITE) keeps that choice for the copy's configure, so the
check does not compile the CUDA kernels a second time (CI's tree is configured as the pages
say).

Prints one line per block, "PASS docs.PAGE:LINE", "FAIL docs.PAGE:LINE: why" or
"SKIP docs.PAGE:LINE (skipped: REASON)", each block's log in LOGDIR/docs.PAGE_LINE.log (its
script, output and exit status), then "docs check: N blocks passed, M failed, K skipped". Exit status 0
only when nothing failed.

Usage: check_docs.py [--repo DIR] [--logdir DIR] [--only PAGE[:LINE]]...
Environment: CGPU_DOCS_TIMEOUT (default limit of a block, s), CGPU_DOCS_KEEP=1 (keep the
temporary directory).
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

RUN_LANGS = {"sh", "bash", "console", "python"}
DIRECTIVE = re.compile(r"^\s*<!--\s*docs-check:\s*(.*?)\s*-->\s*$")
KNOWN = ("skip", "expect", "then", "in-copy", "timeout", "output")
# the first word of a line that is a command, for blocks fenced as text by mistake
COMMAND_WORDS = re.compile(
    r"^\s*(\$ |mpirun |mpiexec |mpicc |make( |$)|\./|bash |sh |python3? |export |cd |sudo |"
    r"ompi_info |apt(-get)? |git |ls |cat |mkdir )")


class Block:
    def __init__(self, page, line, lang, text, directives):
        self.page, self.line, self.lang, self.text = page, line, lang, text
        self.directives = directives  # list of (word, argument)

    @property
    def name(self):
        return f"docs.{self.page}:{self.line}"

    def get(self, word):
        return [arg for w, arg in self.directives if w == word]


def parse(path, page):
    """The fenced blocks of one page, with their directives, and the page's problems."""
    blocks, problems = [], []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(`{3,})\s*([A-Za-z0-9_+-]*)\s*$", lines[i])
        if not m:
            if DIRECTIVE.match(lines[i]):
                j = i + 1
                while j < len(lines) and DIRECTIVE.match(lines[j]):
                    j += 1
                if j >= len(lines) or not lines[j].startswith("```"):
                    problems.append(f"{page}:{i + 1}: a docs-check directive not directly above a fence")
                i = j
                continue
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i
        directives = []
        k = i - 1
        while k >= 0 and DIRECTIVE.match(lines[k]):
            body = DIRECTIVE.match(lines[k]).group(1)
            word, _, arg = body.partition(" ")
            if word.rstrip(",") == "output":
                word, arg = "output", body[len("output"):].strip(" ,")
            if word not in KNOWN:
                problems.append(f"{page}:{k + 1}: unknown docs-check directive '{word}'")
            directives.insert(0, (word, arg.strip()))
            k -= 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        if i >= len(lines):
            problems.append(f"{page}:{start + 1}: fence never closed")
        blocks.append(Block(page, start + 1, lang, "\n".join(body) + "\n", directives))
        i += 1
    return blocks, problems


def clean_env(home, tmpdir):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OMPI_MCA_") and k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env["HOME"] = home
    env["TMPDIR"] = tmpdir  # what the blocks make with mktemp goes when the check ends
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def run(cmd, cwd, env, limit, log):
    """Runs cmd (a list) in its own process group; returns (status, output, timed_out)."""
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    out = out.decode("utf-8", "replace")
    log.write(out)
    log.write(f"\n+ exit status {proc.returncode} after {time.time() - start:.1f} s\n")
    if timed_out:
        log.write(f"+ TIMED OUT: killed after {limit} s\n")
    return proc.returncode, out, timed_out


def console_script(text):
    """A console block: the lines after "$ " (and their continuations) are the commands, the
    others the output they must print."""
    cmds, want, cont = [], [], False
    for ln in text.splitlines():
        if cont or ln.startswith("$ "):
            cmds.append(ln[2:] if ln.startswith("$ ") and not cont else ln)
            cont = ln.endswith("\\")
        elif ln.strip():
            want.append(ln)
    return "\n".join(cmds) + "\n", want


def line_pattern(line, numbers_vary):
    parts = []
    for piece in re.split(r"(\.\.\.)", line.strip()):
        if piece == "...":
            parts.append(".*")
        elif numbers_vary:
            parts.append(r"[0-9]+(?:\.[0-9]+)?".join(re.escape(p) for p in re.split(r"[0-9]+(?:\.[0-9]+)?", piece)))
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def missing_lines(want, out, numbers_vary):
    got = out.splitlines()
    return [w for w in want if w.strip() and not any(line_pattern(w, numbers_vary).search(g) for g in got)]


class Checker:
    def __init__(self, repo, logdir, limit):
        self.repo, self.logdir, self.limit = repo, logdir, limit
        self.tmp = tempfile.mkdtemp(prefix="cgpu-docs.")
        self.home = os.path.join(self.tmp, "home")
        self.work = os.path.join(self.tmp, "work")  # where the python blocks run
        os.makedirs(self.home)
        os.makedirs(self.work)
        os.makedirs(os.path.join(self.tmp, "tmp"))
        self.env = clean_env(self.home, os.path.join(self.tmp, "tmp"))
        self.copy = None  # (directory, env) of the in-copy blocks
        self.copy_failed = False
        self.python = find_python()
        self.passed = self.failed = self.skipped = 0

    def logpath(self, name):
        return os.path.join(self.logdir, re.sub(r"[^A-Za-z0-9_.=-]", "_", name) + ".log")

    def report(self, name, status, why, log_path):
        if status == "PASS":
            self.passed += 1
            print(f"PASS {name}")
        elif status == "SKIP":
            self.skipped += 1
            print(f"SKIP {name} (skipped: {why})")
            with open(log_path, "a") as log:
                log.write(f"skipped: {why}\n")
        else:
            self.failed += 1
            print(f"FAIL {name}: {why}")
            with open(log_path, "a") as log:
                log.write(f"FAIL: {why}\n")
        sys.stdout.flush()

    def setup(self):
        """Installs the build tree into the temporary HOME, as quickstart.sh installs."""
        name = "docs.setup_install_into_temporary_home"
        path = self.logpath(name)
        with open(path, "w") as log:
            cmd = ["make", "install", f"prefix={self.home}/.local",
                   f"ompiplugindir={self.home}/.openmpi/components"]
            log.write("+ " + " ".join(cmd) + "\n")
            log.flush()
            rc, _, _ = run(cmd, self.repo, self.env, 600, log)
        if rc != 0:
            self.report(name, "FAIL", "make install into the temporary HOME failed", path)
            return False
        return True

    def make_copy(self, log):
        d = os.path.join(self.tmp, "copy")
        home = os.path.join(self.tmp, "copy-home")
        os.makedirs(d)
        os.makedirs(home)
        env = clean_env(home, os.path.join(self.tmp, "tmp"))
        # the build tree's files with their times (so make sees what is up to date), not .git
        tar = "tar -C {src} --exclude=./.git -cf - . | tar -C {dst} -xpf -".format(
            src=shlex_quote(self.repo), dst=shlex_quote(d))
        log.write(f"+ copy of the build tree: {tar}\n")
        rc = subprocess.call(tar, shell=True, stdout=log, stderr=subprocess.STDOUT)
        if rc != 0:
            return None
        status = os.path.join(self.repo, "config.status")
        args = ""
        if os.path.exists(status):
            args = subprocess.run(["sh", status, "--config"], capture_output=True,
                                  text=True, cwd=self.repo).stdout
        if re.search(r"(^|\s)'?(--with-cuda=no|--without-cuda)'?(\s|$)", args):
            site = os.path.join(self.tmp, "config.site")
            with open(site, "w") as f:
                f.write("# the build tree was configured --with-cuda=no: keep it so\nwith_cuda=no\n")
            env["CONFIG_SITE"] = site
            log.write(f"+ the build tree was configured --with-cuda=no: CONFIG_SITE={site}\n")
        return d, env

    def run_block(self, b, last_out):
        name, path = b.name, self.logpath(b.name)
        skip = b.get("skip")
        with open(path, "w") as log:
            log.write(f"+ {b.page}:{b.line} ```{b.lang}\n")
            for w, a in b.directives:
                log.write(f"+ docs-check: {w} {a}\n")
            log.write(b.text)
            log.write("+ ----\n")
        if skip:
            self.report(name, "SKIP", skip[0] or "no reason given", path)
            return last_out
        limit = int(b.get("timeout")[0]) if b.get("timeout") else self.limit
        cwd, env = self.repo, self.env
        with open(path, "a") as log:
            if b.get("in-copy"):
                if self.copy_failed:
                    # what it checks (an uninstall, say) needs what the failed one did
                    self.report(name, "FAIL", "an earlier in-copy block failed", path)
                    return ""
                if self.copy is None:
                    self.copy = self.make_copy(log)
                if self.copy is None:
                    self.copy_failed = True
                    self.report(name, "FAIL", "could not copy the build tree", path)
                    return ""
                cwd, env = self.copy
            want = []
            if b.lang == "python":
                script = os.path.join(self.work, f"block_{b.page.replace('/', '_')}_{b.line}.py")
                with open(script, "w") as f:
                    f.write(b.text)
                if not self.python:
                    self.report(name, "FAIL", "neither python3 in PATH nor /usr/bin/python3 imports "
                                "mpi4py and numpy (quickstart.sh installs python3-mpi4py "
                                "python3-numpy)", path)
                    return ""
                cmd = [self.python, script]
                cwd = self.work
            else:
                text = b.text
                if b.lang == "console":
                    text, want = console_script(text)
                then = "".join(f"{t}\n" for t in b.get("then"))
                script = f"set -eo pipefail\n{text}\n# checks of the docs check\n{then}"
                cmd = ["bash", "-c", script, "docs-check"]
            log.write(f"+ run in {cwd} (HOME={env['HOME']}, limit {limit} s)\n")
            log.flush()
            rc, out, timed_out = run(cmd, cwd, env, limit, log)
        ok = False
        if timed_out:
            self.report(name, "FAIL", f"timed out after {limit} s", path)
        elif rc != 0:
            self.report(name, "FAIL", f"exit status {rc}", path)
        else:
            bad = [e for e in b.get("expect") if not re.search(e, out, re.M)]
            bad += [f"the line '{w}'" for w in missing_lines(want, out, False)]
            if bad:
                self.report(name, "FAIL", "output lacks " + "; ".join(bad), path)
            else:
                self.report(name, "PASS", "", path)
                ok = True
        if b.get("in-copy") and not ok:
            self.copy_failed = True
        return out

    def check_output(self, b, last_out):
        name, path = b.name, self.logpath(b.name)
        vary = "numbers vary" in b.get("output")[0]
        with open(path, "w") as log:
            log.write(f"+ {b.page}:{b.line}: the lines of this block in the output above it\n")
            log.write(b.text)
        if last_out is None:
            self.report(name, "FAIL", "an output block with no block run above it on the page", path)
            return
        miss = missing_lines(b.text.splitlines(), last_out, vary)
        if miss:
            with open(path, "a") as log:
                log.write("+ the output it was compared with:\n" + last_out)
            self.report(name, "FAIL", "the output above does not print: " + " | ".join(miss), path)
        else:
            self.report(name, "PASS", "", path)


def find_python():
    """The python3 that imports mpi4py and numpy, as test/find_python.sh chooses it (the one
    in PATH, else the system's, which Debian's python3-mpi4py serves: a PATH may start with
    pyenv's or a virtualenv's)."""
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "find_python.sh")
    r = subprocess.run(["bash", helper], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       universal_newlines=True)
    return r.stdout.strip() if 0 == r.returncode and r.stdout.strip() else None


def shlex_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("--logdir")
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args()
    repo = os.path.abspath(a.repo)
    logdir = a.logdir or tempfile.mkdtemp(prefix="cgpu-docs-logs.")
    os.makedirs(logdir, exist_ok=True)
    pages = ["README.md"] + sorted(os.path.relpath(p, repo) for p in glob.glob(os.path.join(repo, "docs", "*.md")))
    checker = Checker(repo, logdir, int(os.environ.get("CGPU_DOCS_TIMEOUT", "180")))
    print(f"docs check: {len(pages)} pages, logs in {logdir}, temporary HOME {checker.home}")

    everything, problems = [], []
    for page in pages:
        blocks, probs = parse(os.path.join(repo, page), page)
        everything.append((page, blocks))
        problems += probs
        for b in blocks:
            if b.lang not in RUN_LANGS and not b.get("output") and COMMAND_WORDS.match(b.text):
                problems.append(f"{b.page}:{b.line}: a command fenced as '{b.lang or 'nothing'}': "
                                "fence it as sh (with a skip directive if it cannot run here)")
            if b.get("output") and b.lang in RUN_LANGS:
                problems.append(f"{b.page}:{b.line}: an output directive on a block that runs")
    path = checker.logpath("docs.pages_well_formed")
    with open(path, "w") as log:
        log.write("\n".join(problems) + "\n")
    if not a.only:
        checker.report("docs.pages_well_formed", "FAIL" if problems else "PASS", "; ".join(problems), path)

    def wanted(b):
        return not a.only or any(o in (b.page, f"{b.page}:{b.line}") for o in a.only)

    try:
        if checker.setup():
            for page, blocks in everything:
                last_out = None
                for b in blocks:
                    if not wanted(b):
                        continue
                    if b.get("output"):
                        checker.check_output(b, last_out)
                    elif b.lang in RUN_LANGS:
                        last_out = checker.run_block(b, last_out)
    finally:
        if os.environ.get("CGPU_DOCS_KEEP") != "1":
            shutil.rmtree(checker.tmp, ignore_errors=True)
    print(f"docs check: {checker.passed} blocks passed, {checker.failed} failed, "
          f"{checker.skipped} skipped")
    return 1 if checker.failed or checker.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
