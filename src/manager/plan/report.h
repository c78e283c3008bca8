// `plan`'s report: what uninstall_driver would do on this node now, as data (build.h decides it, render.h
// shows it; docs/plan.md describes the output). Its `flow` is the run's own path and steps
// (manager/commands/flow_steps); the rest is what each step would take and what the node and host look like.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "manager/commands/flow_steps.h"
#include "manager/rules/pdb.h"
#include "manager/rules/upgrade_wave.h"

namespace dm::manager {

// A node label the run would write.
struct PlanLabel {
  std::string key;
  std::string from;  // "" = absent
  std::string to;
  std::string batch;  // "pause" (restored at the end), "dra-plugin" (paused last), "pre-installed"
};

// What the run would do with one pod.
enum class PodAction : std::uint8_t { kWait, kReset, kEvict, kRefused, kIgnored };
// What it would do with the GPU client taint.
enum class TaintAction : std::uint8_t { kNone, kAdd, kAlreadyOurs, kPresentNotOurs };
// What it would do with the node's schedulability.
enum class CordonAction : std::uint8_t { kNone, kCordon, kAlreadyOurs, kCordonedByOther };

struct PlanPod {
  std::string pod;  // namespace/name
  PodAction action = PodAction::kIgnored;
  std::string step;  // operands | gpu-clients | gpu-workloads | dra-plugin-clients | dra-plugin | ""
  std::string reason;
  std::vector<std::string> warnings;
  std::string filter;  // the pod filter that decided it ("" = a step's own rule, e.g. an operand wait)
};

struct PlanModule {
  std::string name;
  int refcount = 0;
  std::vector<std::string> holders;  // modules using it
  std::vector<std::string> users;    // processes with its device files open
};

// A DRA ResourceClaim of the GPU driver that a pod on the node holds.
struct PlanClaim {
  std::string claim;  // namespace/name
  std::string pod;    // namespace/name
};

struct Plan {
  std::string node;
  FlowSteps flow;  // the run's path and steps, as the run decides them
  // Why DRA counts as in use when the operator did not deploy its driver here ("" otherwise; dra_plugin.h).
  std::string dra_in_use;
  std::string path_reason;
  std::vector<std::string> refusals;  // what would make the run fail, and at which step
  std::vector<std::string> steps;     // the steps of `flow`, rendered in order

  bool upgrade_policy = false;
  bool gpu_pod_eviction = false;  // effective (the policy supersedes it)
  bool auto_drain = false;        // effective
  std::vector<PlanLabel> labels;

  std::string taint;  // the configured GPU client taint
  TaintAction taint_action = TaintAction::kNone;
  std::string taint_reason;
  std::string own_pod;       // namespace/name, "" when not found
  std::string own_pod_note;  // how it was looked for, or why it was not found/read
  std::optional<bool> own_pod_tolerates;

  CordonAction cordon = CordonAction::kNone;
  std::string cordon_reason;

  std::vector<PlanPod> pods;
  // The GPU clients reset with the taint: those it keeps off the node until the end, and those that
  // tolerate it (their controller recreates them at once, docs/gpu-clients.md).
  std::vector<std::string> clients_kept_off;
  std::vector<std::string> clients_tolerating;
  std::vector<PlanClaim> dra_claims;  // GPU claims held by pods on the node
  std::string dra_claims_note;        // "" or why the claims are unknown
  NodeEstimate estimate;              // the node's time out (the pods that go, plus the overhead)
  std::vector<PdbImpact> pdbs;
  std::string pdb_note;  // "" or why the budgets are unknown

  bool host_on_node = true;         // false: the host part was not read (plan run off the node)
  std::string host_note;            // off the node: where the inferred host facts come from
  std::string host_driver_version;  // "" = none
  bool nvidia_loaded = false;
  std::string unload;  // can the kernel unload the stack now, and if not why
  std::vector<PlanModule> modules;
  std::vector<std::string> holders;  // "nvidia: held by pid 42 (python3) in pod ml/train-0"
  std::vector<std::string> mounts;
  std::string mounts_note;
  std::string skip;                    // the skip decision's summary, "" when the path never asks it
  std::vector<std::string> leftovers;  // traces of earlier runs on the node and what would happen to them
  std::vector<std::string> notes;      // reads that failed or were forbidden
};

}  // namespace dm::manager
