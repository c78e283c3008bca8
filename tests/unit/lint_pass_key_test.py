"""tools/lint/pass_key.py: what changes the key of a clang-tidy pass and what does not."""
import os
import shutil
import stat
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tools", "lint"))
import pass_key  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class PassKeyTest(unittest.TestCase):
    """A checkout with src/ and tests/, a build tree inside it and a library's headers outside it."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.checkout = self.make_checkout(os.path.join(self.tmp, "one"))
        self.system = os.path.join(self.tmp, "usr", "include")
        write(os.path.join(self.system, "lib", "lib.h"), "int lib();\n")
        write(os.path.join(self.system, "shadow.h"), "int from_system();\n")

    @staticmethod
    def make_checkout(root):
        write(os.path.join(root, ".clang-tidy"), "Checks: '-*,bugprone-*'\n")
        write(os.path.join(root, "tests", ".clang-tidy"), "InheritParentConfig: true\n")
        write(os.path.join(root, "src", "a", "a.h"), '#pragma once\n#include "b/b.h"\n#include <lib/lib.h>\n')
        write(os.path.join(root, "src", "b", "b.h"), "#pragma once\n#include <vector>\n#include \"local.h\"\n")
        write(os.path.join(root, "src", "b", "local.h"), "#pragma once\n")
        write(os.path.join(root, "src", "unused.h"), "#pragma once\n")
        write(os.path.join(root, "src", "a", "a.cc"), '#include "a/a.h"\n#include <string>\nint a() { return 0; }\n')
        write(os.path.join(root, "tests", "t.cc"), '#include "a/a.h"\n#  include   <shadow.h>\nint t();\n')
        os.makedirs(os.path.join(root, "build"))
        return root

    def entry(self, root, name, flags=(), out="CMakeFiles/x.dir/x.o"):
        build = os.path.join(root, "build")
        source = os.path.join(root, name)
        args = (["/usr/bin/c++", "-I" + os.path.join(root, "src"), "-isystem", self.system, "-std=c++20", *flags,
                 "-o", out, "-c", source])
        return {"directory": build, "arguments": args, "file": source}

    def key(self, name, root=None, version="Debian LLVM version 14.0.6", **kw):
        root = root or self.checkout
        return pass_key.Keys(root, os.path.join(root, "build"), version).key(self.entry(root, name, **kw))

    def test_project_headers_are_found_transitively_and_system_ones_are_not(self):
        e = self.entry(self.checkout, "src/a/a.cc")
        found = pass_key.Keys(self.checkout, e["directory"], "v").project_headers(e["file"], e["arguments"],
                                                                               e["directory"])
        names = sorted(os.path.relpath(p, self.checkout) for p in found)
        self.assertEqual(names, ["src/a/a.h", "src/b/b.h", "src/b/local.h"])

    def test_a_change_to_a_header_included_through_another_changes_the_key(self):
        before = self.key("src/a/a.cc")
        write(os.path.join(self.checkout, "src", "b", "local.h"), "#pragma once\nint changed();\n")
        self.assertNotEqual(before, self.key("src/a/a.cc"))

    def test_a_change_to_a_header_the_file_does_not_include_keeps_the_key(self):
        before = self.key("src/a/a.cc")
        write(os.path.join(self.checkout, "src", "unused.h"), "#pragma once\nint changed();\n")
        self.assertEqual(before, self.key("src/a/a.cc"))

    def test_a_change_to_a_system_header_keeps_the_key(self):
        before = self.key("src/a/a.cc")
        write(os.path.join(self.system, "lib", "lib.h"), "int lib();\nint lib_3_0_22();\n")
        self.assertEqual(before, self.key("src/a/a.cc"))

    def test_a_project_header_that_shadows_a_system_one_is_in_the_key(self):
        before = self.key("tests/t.cc")
        write(os.path.join(self.checkout, "src", "shadow.h"), "int from_project();\n")  # -I comes before -isystem
        shadowed = self.key("tests/t.cc")
        self.assertNotEqual(before, shadowed)
        write(os.path.join(self.checkout, "src", "shadow.h"), "int from_project_changed();\n")
        self.assertNotEqual(shadowed, self.key("tests/t.cc"))

    def test_a_quoted_include_is_looked_for_beside_its_includer_first(self):
        write(os.path.join(self.checkout, "src", "local.h"), "#pragma once\n")  # b.h's "local.h" is src/b/local.h
        before = self.key("src/a/a.cc")
        write(os.path.join(self.checkout, "src", "local.h"), "#pragma once\nint changed();\n")
        self.assertEqual(before, self.key("src/a/a.cc"))

    def test_a_forced_project_include_is_in_the_key(self):
        write(os.path.join(self.checkout, "src", "forced.h"), "#pragma once\n")
        flags = ["-include", os.path.join(self.checkout, "src", "forced.h")]
        before = self.key("src/a/a.cc", flags=flags)
        write(os.path.join(self.checkout, "src", "forced.h"), "#pragma once\nint changed();\n")
        self.assertNotEqual(before, self.key("src/a/a.cc", flags=flags))

    def test_the_same_tree_in_another_clone_has_the_same_key(self):
        other = self.make_checkout(os.path.join(self.tmp, "elsewhere", "two"))
        self.assertEqual(self.key("src/a/a.cc"), self.key("src/a/a.cc", root=other))
        self.assertEqual(self.key("tests/t.cc"), self.key("tests/t.cc", root=other))

    def test_a_compile_flag_changes_the_key_and_the_output_name_does_not(self):
        before = self.key("src/a/a.cc")
        self.assertNotEqual(before, self.key("src/a/a.cc", flags=["-DNDEBUG"]))
        self.assertEqual(before, self.key("src/a/a.cc", out="elsewhere/CMakeFiles/y.dir/x.o"))

    def test_the_nested_clang_tidy_changes_only_the_keys_below_it(self):
        src, tests = self.key("src/a/a.cc"), self.key("tests/t.cc")
        write(os.path.join(self.checkout, "tests", ".clang-tidy"), "InheritParentConfig: true\nChecks: '-bugprone-*'\n")
        self.assertEqual(src, self.key("src/a/a.cc"))
        self.assertNotEqual(tests, self.key("tests/t.cc"))
        write(os.path.join(self.checkout, ".clang-tidy"), "Checks: '-*,performance-*'\n")
        self.assertNotEqual(src, self.key("src/a/a.cc"))

    def test_the_clang_tidy_version_changes_the_key(self):
        self.assertNotEqual(self.key("src/a/a.cc"), self.key("src/a/a.cc", version="Debian LLVM version 16.0.6"))

    def test_the_version_line_leaves_out_what_describes_the_machine(self):
        fake = os.path.join(self.tmp, "clang-tidy")
        write(fake, "#!/bin/sh\nprintf 'Debian LLVM version 14.0.6\\n  Optimized build.\\n  Host CPU: znver3\\n'\n")
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
        self.assertEqual(pass_key.version_line(fake), "Debian LLVM version 14.0.6")


if __name__ == "__main__":
    unittest.main(verbosity=2)
