// The RBAC files of deploy/ grant exactly what the code asks for: one table in the code
// (manager::permissions(), commands/preflight.h) lists every verb each command sends, preflight asks for the
// run's rows, and each role file holds the rows of its command, no more and no fewer.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "manager/commands/preflight.h"
#include "support/process.h"

namespace dm::manager {
namespace {

// "verb resource[.group]", as AccessCheck::describe() writes it.
std::string key(std::string_view verb, std::string_view resource, std::string_view group) {
  std::string k = std::string(verb) + " " + std::string(resource);
  if (!group.empty()) k += "." + std::string(group);
  return k;
}

// Every verb x resource x apiGroup of the ClusterRoles of a YAML file (one or more documents).
std::set<std::string> granted(const std::string& rel) {
  std::set<std::string> out;
  for (const YAML::Node& doc : YAML::LoadAll(test::read_file(test::source_path(rel)))) {
    if (!doc.IsMap() || doc["kind"].as<std::string>("") != "ClusterRole") continue;
    for (const YAML::Node& rule : doc["rules"]) {
      for (const auto& group : rule["apiGroups"]) {
        for (const auto& resource : rule["resources"]) {
          for (const auto& verb : rule["verbs"]) {
            out.insert(key(verb.as<std::string>(), resource.as<std::string>(), group.as<std::string>()));
          }
        }
      }
    }
  }
  return out;
}

template <class Pick>
std::set<std::string> rows(Pick pick) {
  std::set<std::string> out;
  for (const Permission& p : permissions()) {
    if (pick(p)) out.insert(key(p.verb, p.resource, p.group));
  }
  return out;
}

TEST(Permissions, TheRunsRoleGrantsEveryVerbTheRunSendsAndNothingElse) {
  const auto run = rows([](const Permission& p) { return p.run != RunNeed::kNotUsed; });
  EXPECT_EQ(granted("deploy/clusterrole.yaml"), run);
  EXPECT_TRUE(run.contains("get resourceclaims.resource.k8s.io")) << "the run GETs each claim a pod names";
  EXPECT_FALSE(run.contains("list resourceclaims.resource.k8s.io")) << "only plan lists the claims";
  EXPECT_FALSE(run.contains("list runtimeclasses.node.k8s.io")) << "only plan lists the RuntimeClasses";
}

TEST(Permissions, ThePlanRoleAndThePlanJobGrantEveryVerbPlanSendsAndNothingElse) {
  const auto plan = rows([](const Permission& p) { return p.plan; });
  EXPECT_EQ(granted("deploy/clusterrole-plan.yaml"), plan);
  EXPECT_EQ(granted("deploy/plan-job.yaml"), plan);
  for (const auto& k : plan) {
    EXPECT_TRUE(k.starts_with("get ") || k.starts_with("list ")) << k << ": plan only reads";
  }
}

TEST(Permissions, TheRecoverJobGrantsEveryVerbRecoverSendsAndNothingElse) {
  const auto recover = rows([](const Permission& p) { return p.recover; });
  EXPECT_EQ(granted("deploy/recover-job.yaml"), recover);
  EXPECT_EQ(recover, (std::set<std::string>{"get nodes", "patch nodes"}));
}

// Preflight asks for the rows the run cannot do without under its settings: each row exactly once, as
// its describe() names it, the node's rows for this node.
TEST(Permissions, PreflightAsksForTheRowsTheSettingsNeed) {
  Settings s;
  s.node_name = "gpu-1";
  const auto asked = [&](bool dra_on) {
    std::set<std::string> out;
    for (const auto& c : uninstall_access_checks(s, dra_on)) {
      EXPECT_TRUE(out.insert(c.describe()).second) << c.describe() << " asked twice";
      if (c.resource == "nodes") {
        EXPECT_EQ(c.name, "gpu-1") << c.describe();
      }
    }
    return out;
  };
  const auto needed = [](std::initializer_list<RunNeed> needs) {
    return rows([needs](const Permission& p) {
      for (RunNeed n : needs) {
        if (p.run == n) return true;
      }
      return false;
    });
  };
  EXPECT_EQ(asked(false), needed({RunNeed::kAlways, RunNeed::kEviction}));
  EXPECT_EQ(asked(true), needed({RunNeed::kAlways, RunNeed::kEviction, RunNeed::kDra}));
  s.enable_gpu_pod_eviction = false;
  s.enable_auto_drain = false;
  EXPECT_EQ(asked(true), needed({RunNeed::kAlways, RunNeed::kDra}));
}

}  // namespace
}  // namespace dm::manager
