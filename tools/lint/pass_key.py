"""The key of a clang-tidy pass over one file: what the project controls of what clang-tidy reads for it.

A key covers
  * the file's path in the checkout and its text;
  * the path and text of every project header it includes, transitively: a header that the compile command's
    search path finds inside the checkout (src/, tests/, tools/, or a header generated into a build tree);
  * the compile command, normalised: the checkout's and the build tree's absolute paths become placeholders,
    and what only names outputs (-o, -c, dependency files) is left out;
  * every .clang-tidy clang-tidy reads for the file (the one in its directory and each one above it, up to the
    checkout's root: a nested one may inherit its parent's);
  * clang-tidy's version line.

System headers (a library's, the C++ standard library's) are not in the key: an upgrade of a Debian package
changes no key, so a clone does not re-check the tree for it. What such an upgrade can hide (a warning that
only appears with the new headers) is caught by the full pass, `scripts/clang-tidy-check --all` (docs/lint.md).

The includes are found by scanning `#include` lines, not by running the preprocessor: a header named under an
#if that is false is in the key too. That costs a re-check when such a header changes, never a missed one, and
keeps the keys of the whole tree a matter of a second.
"""
import hashlib
import os
import re
import shlex
import subprocess

SCHEME = b"clang-tidy-pass-key 2"  # changes when what a key covers changes: every older key stops matching

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include(?:_next)?[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)
# What only names outputs, left out of the key: flags with a value, flags alone.
_OUTPUT_WITH_VALUE = ("-o", "-MF", "-MT", "-MQ")
_OUTPUT_ALONE = ("-c", "-MD", "-MMD")
# The include search path, in the compiler's order (the quote-only one first).
_SEARCH = ("-iquote", "-I", "-isystem", "-idirafter")


def version_line(clang_tidy):
    """The line of `clang-tidy --version` that names the version (the rest describes the machine)."""
    out = subprocess.run([clang_tidy, "--version"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "version" in line:
            return line.strip()
    raise RuntimeError(f"{clang_tidy} --version names no version: {out!r}")


def compile_args(entry):
    return entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])


def _under(path, directory):
    return path == directory or path.startswith(directory + os.sep)


class Keys:
    """Keys of the files of one checkout compiled in one build tree; file texts and include lists are read once
    per instance, so one instance serves one run of the check."""

    def __init__(self, root, build, tidy_version):
        self.root = os.path.realpath(root)
        self.build = os.path.realpath(build)
        self.tidy_version = tidy_version.encode()
        self._digests = {}
        self._includes = {}
        self._configs = {}

    def key(self, entry):
        """The key of a pass over the file of one compile_commands.json entry."""
        args = compile_args(entry)
        directory = entry["directory"]
        source = os.path.realpath(os.path.join(directory, entry["file"]))
        h = hashlib.sha256()

        def part(data):
            h.update(data)
            h.update(b"\0")

        part(SCHEME)
        part(self.tidy_version)
        for config in self._config_files(source):
            part(self._name(config).encode())
            part(self._digest(config))
        part(self._name(source).encode())
        part(self._digest(source))
        part(b"flags")
        for flag in self._flags(args):
            part(flag.encode())
        part(b"headers")
        for header in sorted(self.project_headers(source, args, directory), key=self._name):
            part(self._name(header).encode())
            part(self._digest(header))
        return h.hexdigest()

    def project_headers(self, source, args, directory):
        """The project headers the file includes, transitively (real paths)."""
        dirs = self._search_dirs(args, directory)
        forced = [os.path.realpath(os.path.join(directory, v)) for f, v in zip(args, args[1:]) if f == "-include"]
        seen = {p for p in forced if os.path.isfile(p) and self._is_project(p)}
        todo = [*seen, source]
        while todo:
            current = todo.pop()
            for quote, name in self._include_lines(current):
                found = self._resolve(name, quote, os.path.dirname(current), dirs)
                if found and found not in seen and self._is_project(found):
                    seen.add(found)
                    todo.append(found)
        seen.discard(source)
        return seen

    def _search_dirs(self, args, directory):
        """(quote-only dirs, dirs for both forms), in the compiler's order."""
        found = {flag: [] for flag in _SEARCH}
        it = iter(args)
        for a in it:
            for flag in _SEARCH:
                if a == flag:
                    value = next(it, None)
                elif a.startswith(flag) and len(a) > len(flag) and not (flag == "-I" and a.startswith("-I-")):
                    value = a[len(flag):]
                else:
                    continue
                if value is not None:
                    found[flag].append(os.path.realpath(os.path.join(directory, value)))
                break
        return found["-iquote"], found["-I"] + found["-isystem"] + found["-idirafter"]

    def _resolve(self, name, quote, includer_dir, dirs):
        """The file the compiler would open for the include, or None when only its default (system) directories
        could hold it. The first match wins, inside the checkout or not, as for the compiler."""
        quote_dirs, both = dirs
        order = ([includer_dir] + quote_dirs + both) if quote == b'"' else both
        text = os.fsdecode(name)
        if os.path.isabs(text):
            return os.path.realpath(text) if os.path.isfile(text) else None
        for d in order:
            candidate = os.path.join(d, text)
            if os.path.isfile(candidate):
                return os.path.realpath(candidate)
        return None

    def _is_project(self, path):
        return _under(path, self.root) or _under(path, self.build)

    def _include_lines(self, path):
        if path not in self._includes:
            with open(path, "rb") as f:
                self._includes[path] = _INCLUDE.findall(f.read())
        return self._includes[path]

    def _digest(self, path):
        if path not in self._digests:
            with open(path, "rb") as f:
                self._digests[path] = hashlib.sha256(f.read()).digest()
        return self._digests[path]

    def _config_files(self, source):
        """Every .clang-tidy from the file's directory up to the checkout's root, nearest first."""
        directory = os.path.dirname(source)
        if directory not in self._configs:
            configs, d = [], directory
            while _under(d, self.root):
                candidate = os.path.join(d, ".clang-tidy")
                if os.path.isfile(candidate):
                    configs.append(candidate)
                if d == self.root:
                    break
                d = os.path.dirname(d)
            self._configs[directory] = configs
        return self._configs[directory]

    def _name(self, path):
        """A path as the same text in every clone: relative to the build tree or to the checkout."""
        if _under(path, self.build):
            return "@BUILD@/" + os.path.relpath(path, self.build)
        if _under(path, self.root):
            return os.path.relpath(path, self.root)
        return path

    def _flags(self, args):
        """The compile command without what only names outputs, with the checkout's and build tree's paths as
        placeholders (the build tree first: it may lie inside the checkout)."""
        out, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a in _OUTPUT_WITH_VALUE:
                skip = True
            elif a not in _OUTPUT_ALONE and not a.startswith(_OUTPUT_WITH_VALUE[1:]):
                out.append(a.replace(self.build, "@BUILD@").replace(self.root, "@SRC@"))
        return out
