// Golden files of the tests that compare a program's output with a file under tests/fixtures: the
// normalisation of what changes from run to run, and compare-or-update.
#pragma once

#include <string>

namespace dm::test {

// Pod-name hashes (a ReplicaSet's and a pod's suffix, after the namespace's slash) become <rs> and <pod>,
// and runs of two or more spaces after a non-space (a table's column widths, which follow the names) become
// two. Leading indentation is kept.
std::string normalise_pod_names(const std::string& text);

// Compares `got` with the file tests/fixtures/<rel>; with DM_UPDATE_GOLDEN set, rewrites the file with
// `got` first (then review the diff).
void expect_golden(const std::string& rel, const std::string& got);

}  // namespace dm::test
