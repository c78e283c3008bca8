// Pure parts of the Kubernetes client: backoff, Retry-After, error formatting, watch line splitting, paths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/client_impl.h"
#include "kube/errors.h"
#include "kube/list_stream.h"
#include "kube/retry.h"
#include "kube/watch_stream.h"
#include "support/doubles.h"

namespace dm::kube {

using Json = nlohmann::json;
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;

TEST(RetryTest, RetryableStatuses) {
  EXPECT_TRUE(retryable_status(0));  // no response: connection error
  EXPECT_TRUE(retryable_status(429));
  EXPECT_FALSE(retryable_status(429, On429::kReturn));
  EXPECT_TRUE(retryable_status(500));
  EXPECT_TRUE(retryable_status(503));
  EXPECT_TRUE(retryable_status(504));
  EXPECT_FALSE(retryable_status(501));
  for (long s : {200L, 201L, 400L, 401L, 403L, 404L, 409L, 410L, 422L})
    EXPECT_FALSE(retryable_status(s)) << s;
}

TEST(RetryTest, AWriteIsSentAgainOnlyWhenThatCannotRepeatIt) {
  // Reads: whenever the status is worth retrying.
  EXPECT_TRUE(may_send_again("GET", 0, {}));
  EXPECT_TRUE(may_send_again("GET", 503, {}));
  EXPECT_FALSE(may_send_again("GET", 404, {}));
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE"}) {
    SCOPED_TRACE(method);
    // It never left, or the server turned it away: it did not happen.
    EXPECT_TRUE(may_send_again(method, 0, {.request_sent = false}));
    EXPECT_TRUE(may_send_again(method, 429, {}));
    EXPECT_FALSE(may_send_again(method, 429, {.on_429 = On429::kReturn}));
    // It may have happened: only a write whose replay fails cleanly is sent again.
    EXPECT_FALSE(may_send_again(method, 0, {.request_sent = true}));
    EXPECT_FALSE(may_send_again(method, 500, {}));
    EXPECT_FALSE(may_send_again(method, 503, {}));
    EXPECT_TRUE(may_send_again(method, 0, {.replay_harmless = true}));
    EXPECT_TRUE(may_send_again(method, 503, {.replay_harmless = true}));
    EXPECT_FALSE(may_send_again(method, 409, {.replay_harmless = true}));
  }
}

TEST(RetryTest, WhichWritesAreHarmlessToReplay) {
  const Json rv = {{"metadata", {{"name", "n"}, {"resourceVersion", "7"}}}};
  const Json no_rv = {{"metadata", {{"labels", {{"a", "b"}}}}}};
  EXPECT_TRUE(replay_harmless("PUT", rv));
  EXPECT_TRUE(replay_harmless("PATCH", rv));
  EXPECT_FALSE(replay_harmless("PUT", no_rv));
  EXPECT_FALSE(replay_harmless("PATCH", no_rv));
  EXPECT_TRUE(replay_harmless(
      "PATCH", Json::parse(R"([{"op":"test","path":"/x","value":1},{"op":"remove","path":"/x"}])")));
  EXPECT_FALSE(replay_harmless("PATCH", Json::parse(R"([{"op":"remove","path":"/x"}])")));
  EXPECT_TRUE(
      replay_harmless("DELETE", Json::parse(R"({"kind":"DeleteOptions","preconditions":{"uid":"u"}})")));
  EXPECT_FALSE(replay_harmless("DELETE", Json::parse(R"({"kind":"DeleteOptions"})")));
  EXPECT_TRUE(replay_harmless(
      "POST", Json::parse(R"({"kind":"Eviction","deleteOptions":{"preconditions":{"uid":"u"}}})")));
  EXPECT_FALSE(replay_harmless("POST", Json::parse(R"({"kind":"Eviction","deleteOptions":{}})")));
  EXPECT_TRUE(replay_harmless("POST", Json::parse(R"({"kind":"SelfSubjectAccessReview"})")));
  EXPECT_TRUE(replay_harmless("POST", Json::parse(R"({"kind":"Lease","metadata":{"name":"l"}})")));
  EXPECT_FALSE(replay_harmless("POST", Json::parse(R"({"kind":"Event","metadata":{"generateName":"p."}})")));
}

TEST(RetryTest, ParseRetryAfterSeconds) {
  EXPECT_EQ(parse_retry_after("1"), milliseconds(1000));
  EXPECT_EQ(parse_retry_after(" 7 \r\n"), milliseconds(7000));
  EXPECT_EQ(parse_retry_after(""), std::nullopt);
  EXPECT_EQ(parse_retry_after("soon"), std::nullopt);
  EXPECT_EQ(parse_retry_after("-3"), std::nullopt);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
}

TEST(RetryTest, BackoffDoublesAndIsCapped) {
  const RetryPolicy p{milliseconds(200), milliseconds(1000)};
  // jitter 0.999.. gives (almost) the full delay, jitter 0 half of it.
  EXPECT_EQ(backoff_delay(p, 0, 0.0), milliseconds(100));
  EXPECT_EQ(backoff_delay(p, 0, 1.0), milliseconds(200));
  EXPECT_EQ(backoff_delay(p, 1, 1.0), milliseconds(400));
  EXPECT_EQ(backoff_delay(p, 2, 1.0), milliseconds(800));
  EXPECT_EQ(backoff_delay(p, 3, 1.0), milliseconds(1000));
  EXPECT_EQ(backoff_delay(p, 30, 1.0), milliseconds(1000));
  EXPECT_EQ(backoff_delay(p, 30, 0.0), milliseconds(500));
  const auto mid = backoff_delay(p, 1, 0.5);
  EXPECT_EQ(mid, milliseconds(300));
}

// The server's Retry-After is the wait, between the backoff's base (never at once: a Retry-After of 0 would
// send every attempt right after the last) and its cap.
TEST(RetryTest, RetryAfterWinsBetweenTheBaseAndTheCap) {
  const RetryPolicy p{milliseconds(200), milliseconds(5000)};
  EXPECT_EQ(backoff_delay(p, 0, 0.3, milliseconds(2000)), milliseconds(2000));
  EXPECT_EQ(backoff_delay(p, 4, 0.3, milliseconds(60000)), milliseconds(5000));
  EXPECT_EQ(backoff_delay(p, 4, 0.3, milliseconds(0)), milliseconds(200));
  EXPECT_EQ(backoff_delay({milliseconds(0), milliseconds(5000)}, 4, 0.3, milliseconds(0)), milliseconds(0));
}

TEST(RetryTest, ABudgetWithoutADeadlineCountsOnlyTimeNotAnswered) {
  using namespace std::chrono_literals;
  test::FakeClock clock;
  RetryBudget tries(clock, {Deadline{}}, 60s);
  TimePoint since = clock.now();
  clock.advance(40s);
  tries.spent(since, /*turned_away=*/true);  // 40 s of 429s: not counted
  EXPECT_EQ(tries.left(), 60s);
  EXPECT_TRUE(tries.unlimited(true));
  EXPECT_FALSE(tries.unlimited(false));
  since = clock.now();
  clock.advance(50s);
  tries.spent(since, /*turned_away=*/false);  // 50 s without an answer: counted
  EXPECT_EQ(tries.left(), 10s);
  EXPECT_EQ(tries.tried_for(), 90s);
}

TEST(RetryTest, ABudgetWithADeadlineCountsEverything) {
  using namespace std::chrono_literals;
  test::FakeClock clock;
  RetryBudget tries(clock, {Deadline{}, Deadline::after(clock, 30s)}, 5min);
  EXPECT_FALSE(tries.unlimited(true)) << "a step's deadline bounds 429s too";
  const TimePoint since = clock.now();
  clock.advance(20s);
  tries.spent(since, /*turned_away=*/true);
  EXPECT_EQ(tries.left(), 10s);
  RetryBudget once(clock, {Deadline{}}, 0s);
  EXPECT_TRUE(once.single_attempt());
  EXPECT_FALSE(once.unlimited(true)) << "no retry at all stays no retry";
}

TEST(RetryTest, GivingUpSaysForHowLongAndMarksTheErrorUnanswered) {
  Error e = gave_up(Error("GET /api/v1/nodes/n1: connection refused"), std::chrono::seconds(300));
  EXPECT_EQ(e.message,
            "GET /api/v1/nodes/n1: connection refused (not answered for 5m0s: gave up at the deadline)");
  EXPECT_TRUE(e.unanswered);
}

// A read stops when the token fires; a write already sent is let finish for the settle time, then stops.
TEST(KeepGoingTest, AReadStopsAtOnceAWriteAfterTheSettleTime) {
  CancelToken token;
  auto read = keep_going_until(token, /*write=*/false, milliseconds(50));
  auto write = keep_going_until(token, /*write=*/true, milliseconds(50));
  EXPECT_TRUE(read());
  EXPECT_TRUE(write());
  token.cancel();
  EXPECT_FALSE(read());
  EXPECT_TRUE(write()) << "the write is let finish";
  std::this_thread::sleep_for(milliseconds(60));
  EXPECT_FALSE(write()) << "past the settle time";
}

TEST(ApiErrorTest, StatusBody) {
  const auto e = api_error("GET", "/api/v1/nodes/x", 404,
                           R"({"kind":"Status","apiVersion":"v1","status":"Failure",
                               "message":"nodes \"x\" not found","reason":"NotFound",
                               "details":{"name":"x","kind":"nodes"},"code":404})");
  EXPECT_EQ(e.message, R"(GET /api/v1/nodes/x: nodes "x" not found (404 NotFound))");
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.reason, "NotFound");
  EXPECT_TRUE(e.not_found());
}

TEST(ApiErrorTest, CausesNameTheDisruptionBudget) {
  const auto e = api_error("POST", "/api/v1/namespaces/a/pods/p/eviction", 429,
                           R"({"kind":"Status","status":"Failure",
                               "message":"Cannot evict pod as it would violate the pod's disruption budget.",
                               "reason":"TooManyRequests",
                               "details":{"causes":[{"reason":"DisruptionBudget",
                                 "message":"The disruption budget pdb-a needs 2 healthy pods and has 2 currently"}]},
                               "code":429})");
  EXPECT_EQ(
      e.message,
      "POST /api/v1/namespaces/a/pods/p/eviction: Cannot evict pod as it would violate the pod's disruption "
      "budget.: The disruption budget pdb-a needs 2 healthy pods and has 2 currently (429 TooManyRequests)");
  EXPECT_TRUE(e.too_many_requests());
  // Code classifies on the cause type, not on the message.
  ASSERT_EQ(e.causes.size(), 1U);
  EXPECT_EQ(e.causes[0].type, "DisruptionBudget");
  EXPECT_EQ(e.causes[0].message, "The disruption budget pdb-a needs 2 healthy pods and has 2 currently");
  EXPECT_TRUE(e.has_cause("DisruptionBudget"));
  EXPECT_FALSE(e.has_cause("NamespaceTerminating"));
}

TEST(ApiErrorTest, CausesAreKeptWithTheirFieldAndSurviveWrap) {
  const auto e = api_error("POST", "/api/v1/namespaces/gone/pods/p/eviction", 403,
                           R"({"kind":"Status","status":"Failure",
                               "message":"pods \"p\" is forbidden: unable to create new content in namespace gone because it is being terminated",
                               "reason":"Forbidden",
                               "details":{"name":"p","kind":"pods","causes":[{"reason":"NamespaceTerminating",
                                 "message":"namespace gone is being terminated","field":"metadata.namespace"}]},
                               "code":403})");
  EXPECT_TRUE(e.forbidden());
  ASSERT_EQ(e.causes.size(), 1U);
  EXPECT_EQ(e.causes[0].field, "metadata.namespace");
  const Error wrapped = e.wrap("failed to evict pod gone/p");
  EXPECT_TRUE(wrapped.has_cause("NamespaceTerminating"));
  EXPECT_EQ(wrapped.reason, "Forbidden");
}

TEST(ApiErrorTest, StatusOfAWatchErrorEvent) {
  const auto st = parse_status(Json::parse(
      R"j({"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (5)"})j"));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 410);
  EXPECT_EQ(st->reason, "Expired");
  EXPECT_EQ(st->message, "too old resource version: 1 (5)");
  EXPECT_TRUE(st->causes.empty());
  EXPECT_FALSE(parse_status(Json::parse(R"({"kind":"Pod"})")).has_value());
  EXPECT_FALSE(parse_status(Json::parse("[1]")).has_value());
}

TEST(WatchEventTest, DecodesTypeAndObjectAndRefusesOtherLines) {
  const auto ev = decode_watch_event(R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type, "ADDED");
  EXPECT_EQ(ev->object["metadata"]["name"], "a");
  EXPECT_FALSE(decode_watch_event(R"({"type":7,"object":{}})"));
  EXPECT_FALSE(decode_watch_event(R"(["ADDED"])"));
  EXPECT_FALSE(decode_watch_event("{not json"));
}

TEST(WatchEventTest, ErrorObjectThatIsNoStatusGivesWhatItHasAndNeverThrows) {
  // A Status-like object without kind: its fields are taken.
  auto st = watch_error_status(R"({"code":410,"message":"too old","reason":"Expired"})"_json);
  EXPECT_EQ(st.code, 410);
  EXPECT_EQ(st.message, "too old");
  EXPECT_EQ(st.reason, "Expired");
  // Fields of another type count as absent (reading them as int/string used to throw json::type_error
  // out of the watch).
  st = watch_error_status(R"({"code":"410","message":5,"reason":["x"]})"_json);
  EXPECT_EQ(st.code, 0);
  EXPECT_EQ(st.message, "");
  EXPECT_EQ(st.reason, "");
  EXPECT_EQ(watch_error_status("null"_json).code, 0);
}

TEST(ApiErrorTest, NonStatusBodyIsQuoted) {
  const auto e = api_error("GET", "/x", 502, "<html>bad gateway</html>\n");
  EXPECT_EQ(e.message, R"(GET /x: unexpected response "<html>bad gateway</html>" (502))");
  EXPECT_EQ(e.http_status, 502);
  EXPECT_EQ(e.reason, "");
  EXPECT_EQ(api_error("GET", "/x", 503, "").message, "GET /x: empty response (503)");
}

TEST(ApiErrorTest, TransportError) {
  const auto e = transport_error("GET", "/api/v1/pods", "https://127.0.0.1:1", "Couldn't connect to server");
  EXPECT_EQ(
      e.message,
      "GET /api/v1/pods: request to the API server https://127.0.0.1:1 failed: Couldn't connect to server");
  EXPECT_EQ(e.http_status, 0);
}

std::vector<std::string> split(LineSplitter& s, const std::vector<std::string>& chunks) {
  std::vector<std::string> lines;
  for (const auto& c : chunks) {
    s.feed(c, [&](std::string_view l) {
      lines.emplace_back(l);
      return true;
    });
  }
  return lines;
}

TEST(LineSplitterTest, JoinsLinesAcrossChunks) {
  LineSplitter s;
  EXPECT_THAT(split(s, {R"({"type":"ADD)", R"(ED"}
{"type":"MOD)",
                        "IFIED\"}\r\n\n{\"a\":", "1}\n"}),
              ElementsAre(R"({"type":"ADDED"})", R"({"type":"MODIFIED"})", R"({"a":1})"));
  EXPECT_EQ(s.pending(), 0U);
  EXPECT_THAT(split(s, {"partial"}), ElementsAre());
  EXPECT_EQ(s.pending(), 7U);
}

TEST(LineSplitterTest, StopsWhenTheConsumerDoes) {
  LineSplitter s;
  std::vector<std::string> seen;
  const bool more = s.feed("a\nb\nc\n", [&](std::string_view l) {
    seen.emplace_back(l);
    return l != "b";
  });
  EXPECT_FALSE(more);
  EXPECT_THAT(seen, ElementsAre("a", "b"));
}

TEST(PathsTest, ApiPaths) {
  EXPECT_EQ(paths::nodes(), "/api/v1/nodes");
  EXPECT_EQ(paths::node("n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(paths::pods(), "/api/v1/pods");
  EXPECT_EQ(paths::pods("gpu-operator"), "/api/v1/namespaces/gpu-operator/pods");
  EXPECT_EQ(paths::pod("a", "p"), "/api/v1/namespaces/a/pods/p");
  EXPECT_EQ(paths::daemonset("a", "d"), "/apis/apps/v1/namespaces/a/daemonsets/d");
  EXPECT_EQ(paths::resource_claim("a", "c"), "/apis/resource.k8s.io/v1/namespaces/a/resourceclaims/c");
}

}  // namespace
}  // namespace dm::kube

namespace dm::kube {
namespace {

TEST(ParseResponseTest, DropsManagedFieldsAndKeepsEverythingElse) {
  const auto j = parse_response(
      R"({"kind":"PodList","items":[{"metadata":{"name":"a","uid":"u1","managedFields":[{"manager":"k"}],)"
      R"("labels":{"app":"x"}},"spec":{"nodeName":"n"}}],"metadata":{"resourceVersion":"7"}})");
  ASSERT_FALSE(j.is_discarded());
  const auto& md = j["items"][0]["metadata"];
  EXPECT_FALSE(md.contains("managedFields"));
  EXPECT_EQ(md["name"], "a");
  EXPECT_EQ(md["labels"]["app"], "x");
  EXPECT_EQ(j["items"][0]["spec"]["nodeName"], "n");
  EXPECT_EQ(j["metadata"]["resourceVersion"], "7");
  EXPECT_TRUE(parse_response("{not json").is_discarded());
}

// A List response with the characters that could confuse the splitting: braces, brackets, quotes and
// backslashes inside strings, an "items" key inside an item, blanks between the items.
constexpr std::string_view kTrickyList =
    R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","note":"items: [ {"},)"
    R"("items": [ {"metadata":{"name":"a}]","uid":"u1","managedFields":[{"m":"}"}],)"
    R"("annotations":{"q":"say \"}]\" [","items":"[{"}},"spec":{"items":[{"x":[1,{"y":"]"}]}]}} ,)"
    "\n {\"metadata\":{\"name\":\"b\",\"uid\":\"u2\",\"namespace\":\"n\"},\"status\":{}}\n"
    R"(],"tail":{"items":["not","these"]}})";

Json parse_in_pieces(std::string_view text, size_t piece, ListItems items) {
  ListBodyParser parser([items](std::string_view item) { return parse_list_item(item, items); });
  for (size_t i = 0; i < text.size(); i += piece) parser.feed(text.substr(i, piece));
  return parser.finish();
}

TEST(ListBodyParserTest, SameAsParsingTheWholeTextInAnyPieces) {
  const Json whole = parse_response(kTrickyList);
  ASSERT_FALSE(whole.is_discarded());
  ASSERT_EQ(whole["items"].size(), 2U);
  for (size_t piece : {1UL, 2UL, 3UL, 7UL, 64UL, kTrickyList.size()}) {
    const Json j = parse_in_pieces(kTrickyList, piece, ListItems::kWhole);
    EXPECT_EQ(j, whole) << "pieces of " << piece;
  }
  const Json j = parse_in_pieces(kTrickyList, 5, ListItems::kWhole);
  EXPECT_EQ(j["items"][0]["metadata"]["name"], "a}]");
  EXPECT_EQ(j["items"][0]["metadata"]["annotations"]["q"], R"(say "}]" [)");
  EXPECT_FALSE(j["items"][0]["metadata"].contains("managedFields"));
  EXPECT_EQ(j["tail"]["items"], Json::array({"not", "these"}));
  EXPECT_EQ(j["metadata"]["resourceVersion"], "9");
}

// The top-level key is read as JSON decodes it: an escaped character is part of the key (found by
// list_stream_fuzz: "item\"s" was read as "items" and its array taken for the List's items).
TEST(ListBodyParserTest, TheItemsKeyIsMatchedDecoded) {
  for (const std::string text : {R"({"kind":"PodList","item\"s":[{"a":1}],"items":[{"b":2}]})",
                                 R"({"\u0069tems":[{"metadata":{"name":"a"},"status":{}}]})",
                                 R"({"it\\ems":[{"a":1}]})", R"({"items\n":[{"a":1}]})"}) {
    const Json whole = parse_response(text);
    ASSERT_FALSE(whole.is_discarded()) << text;
    for (size_t piece : {1UL, 3UL, text.size()}) {
      EXPECT_EQ(parse_in_pieces(text, piece, ListItems::kWhole), whole) << text << " in pieces of " << piece;
    }
  }
  // Only the decoded "items" goes through the item parser (identities: the status is dropped).
  const Json j = parse_in_pieces(R"({"\u0069tems":[{"metadata":{"name":"a"},"status":{}}]})", 2,
                                 ListItems::kIdentityOnly);
  EXPECT_EQ(j["items"][0], (Json{{"metadata", {{"name", "a"}}}}));
  const Json k =
      parse_in_pieces(R"({"item\"s":[{"metadata":{"name":"a"},"status":{}}]})", 2, ListItems::kIdentityOnly);
  EXPECT_FALSE(k.contains("items"));
  EXPECT_TRUE(k["item\"s"][0].contains("status"));
}

TEST(ListBodyParserTest, IdentitiesKeepOnlyTheNamesOfEachItem) {
  const Json j = parse_in_pieces(kTrickyList, 4, ListItems::kIdentityOnly);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["items"][0], (Json{{"metadata", {{"name", "a}]"}, {"uid", "u1"}}}}));
  EXPECT_EQ(j["items"][1], (Json{{"metadata", {{"name", "b"}, {"uid", "u2"}, {"namespace", "n"}}}}));
  EXPECT_EQ(j["metadata"]["resourceVersion"], "9");  // the List's own metadata stays whole
}

TEST(ListBodyParserTest, EachItemGoesThroughTheItemParser) {
  int calls = 0;
  ListBodyParser parser([&calls](std::string_view item) {
    ++calls;
    Json j = parse_list_item(item, ListItems::kWhole);
    j.erase("status");
    return j;
  });
  parser.feed(kTrickyList);
  const Json j = parser.finish();
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(j["items"][1].contains("status"));
  EXPECT_EQ(j["items"][1]["metadata"]["name"], "b");
}

TEST(ListBodyParserTest, BrokenOrCutTextIsNotJson) {
  const std::string text(kTrickyList);
  for (const std::string& bad :
       {text.substr(0, text.size() - 1), text.substr(0, text.size() / 2),
        std::string(R"({"items":[{"a":1},{"b":}]})"), std::string(R"({"items":[{}]}})"),
        std::string(R"({"items":[{"a":"x}]})"), std::string("[1,2")}) {
    EXPECT_TRUE(parse_in_pieces(bad, 3, ListItems::kWhole).is_discarded()) << bad;
  }
  EXPECT_EQ(parse_in_pieces("", 1, ListItems::kWhole), Json::object());  // a 2xx without a body
  EXPECT_EQ(parse_in_pieces(R"({"kind":"List","items":[]})", 2, ListItems::kWhole),
            (Json{{"kind", "List"}, {"items", Json::array()}}));
}

}  // namespace
}  // namespace dm::kube
