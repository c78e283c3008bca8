#include "manager/pods/dra_helpers.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "manager/pods/waits.h"
#include "manager/rules/dra_helpers.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

// The claims of NVIDIA's DRA drivers the node's pods hold (not the helpers'), nullopt when they cannot be
// read (said once at warning level).
std::optional<std::vector<ClaimHold>> node_claim_holds(const PodFacts& facts, const PodSnapshot& pods) {
  if (!facts.claim_holds) return std::nullopt;
  std::vector<ClaimHold> out;
  for (const auto& shared : pods) {
    const Json& pod = *shared;
    if (kube::pod_finished(pod) || dra_helper_of(pod) || kube::pod_resource_claims(pod).empty()) continue;
    auto holds = facts.claim_holds(pod);
    if (!holds) {
      spdlog::warn("Cannot read the resource claims of pod {}: {}", kube::ref_string(pod),
                   holds.error().message);
      return std::nullopt;
    }
    out.insert(out.end(), holds->begin(), holds->end());
  }
  return out;
}

std::optional<std::string> node_label(const DrainContext& ctx) {
  auto node = ctx.node.get();
  if (!node) return std::nullopt;
  return kube::label(*node, kComputeDomainLabel);
}

Error helpers_stayed(const DrainContext& ctx, const std::vector<DraHelper>& left, const Error& cause) {
  const auto facts = api_pod_facts(ctx.client);
  const auto holds = node_claim_holds(facts, ctx.pods.snapshot()).value_or(std::vector<ClaimHold>{});
  const auto label = node_label(ctx);
  std::vector<std::string> named;
  for (const auto& h : left) {
    const std::string line = h.pod + " (" + describe(h) + "): " + what_keeps(h, label, holds);
    spdlog::error("DRA driver helper still on the node: {}", line);
    named.push_back(line);
  }
  return Error(fmt::format("DRA driver helpers did not leave node {} ({}): {}", ctx.node.node(),
                           cause.message, fmt::join(named, "; ")));
}

}  // namespace

Status await_dra_helpers(const DrainContext& ctx) {
  const PodSnapshot pods = ctx.pods.snapshot();
  std::vector<DraHelper> helpers;
  std::vector<Json> listed;
  for (const auto& shared : pods) {
    listed.push_back(*shared);
    if (kube::pod_finished(*shared)) continue;
    if (auto h = dra_helper_of(*shared)) helpers.push_back(std::move(*h));
  }
  if (auto node = ctx.node.get()) {
    const auto facts = api_pod_facts(ctx.client);
    for (const auto& odd : dra_helper_oddities(*node, listed, node_claim_holds(facts, pods)))
      spdlog::warn("DRA driver helpers: {}", odd);
  }
  if (helpers.empty()) {
    spdlog::info("No DRA driver helper pods on the node");
    return ok_status();
  }
  spdlog::info(
      "Waiting for the DRA driver's helper pods to leave as the DRA kubelet plugin unprepares their "
      "claims (never evicted: their controllers would bring them straight back)");
  for (const auto& h : helpers) {
    spdlog::info("{}: wait [dra-helper]: {}: {}", h.pod, describe(h), how_it_leaves(h));
  }
  const auto check = [&helpers](const PodSnapshot& now) -> Result<std::vector<std::string>> {
    std::vector<std::string> left;
    for (const auto& h : helpers) {
      for (const auto& pod : now) {
        if (kube::string_at(*pod, {"metadata", "uid"}) == h.uid) left.push_back(h.pod);
      }
    }
    return left;
  };
  auto s = ctx.pods.wait_until("DRA driver helpers to leave", check, operand_wait_deadline(ctx), ctx.cancel);
  if (s) {
    spdlog::info("The DRA driver's helper pods have left the node");
    return ok_status();
  }
  if (ctx.cancel.cancelled()) return s.error();
  std::vector<DraHelper> left;
  for (const auto& h : helpers) {
    if (ctx.pods.has_uid(h.uid)) left.push_back(h);
  }
  return helpers_stayed(ctx, left, s.error());
}

}  // namespace dm::manager
