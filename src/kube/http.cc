#include "kube/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <mutex>
#include <utility>

namespace dm::kube {
namespace {

// libcurl wants one global initialisation before any handle exists, ideally before threads start.
void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool iequals_prefix(std::string_view line, std::string_view prefix) {
  if (line.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view trim_view(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

struct HttpConnection::Impl {
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {};

  // State of the transfer in progress.
  const HttpRequest* req = nullptr;
  HttpResponse* resp = nullptr;
  std::exception_ptr
      callback_error;  // thrown by a caller's callback: rethrown once libcurl is out of the way

  ~Impl() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }

  static size_t on_write(char* ptr, size_t size, size_t nmemb, void* userdata) {
    auto* self = static_cast<Impl*>(userdata);
    const size_t len = size * nmemb;
    long code = 0;
    curl_easy_getinfo(self->easy, CURLINFO_RESPONSE_CODE, &code);
    if (self->req->on_body && code >= 200 && code < 300) {
      bool more = false;
      try {
        more = self->req->on_body(std::string_view(ptr, len));
      } catch (...) {
        // Exceptions must not unwind through libcurl's C frames.
        self->callback_error = std::current_exception();
      }
      if (!more) {
        self->resp->aborted = true;
        return 0;  // makes libcurl stop the transfer
      }
      return len;
    }
    self->resp->body.append(ptr, len);
    return len;
  }

  static size_t on_header(char* ptr, size_t size, size_t nmemb, void* userdata) {
    auto* self = static_cast<Impl*>(userdata);
    const size_t len = size * nmemb;
    std::string_view line(ptr, len);
    if (iequals_prefix(line, "HTTP/")) {
      self->resp->retry_after.clear();  // a new response (e.g. after 100 Continue)
    } else if (iequals_prefix(line, "retry-after:")) {
      self->resp->retry_after = std::string(trim_view(line.substr(12)));
    }
    return len;
  }
};

HttpConnection::HttpConnection() : impl_(std::make_unique<Impl>()) {}
HttpConnection::~HttpConnection() = default;

Result<std::unique_ptr<HttpConnection>> HttpConnection::create(const Config& config,
                                                               const std::string& user_agent) {
  global_init_once();
  std::unique_ptr<HttpConnection> c(new HttpConnection());
  Impl& im = *c->impl_;
  im.multi = curl_multi_init();
  im.easy = curl_easy_init();
  if (im.multi == nullptr || im.easy == nullptr) return Error("cannot initialise libcurl");
  CURL* e = im.easy;

  CURLcode rc = CURLE_OK;
  auto set = [&rc](CURLcode r) {
    if (rc == CURLE_OK) rc = r;
  };
  set(curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L));  // threads: no SIGALRM-based DNS timeouts
  set(curl_easy_setopt(e, CURLOPT_ERRORBUFFER, im.errbuf));
  set(curl_easy_setopt(e, CURLOPT_USERAGENT, user_agent.c_str()));
  set(curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Impl::on_write));
  set(curl_easy_setopt(e, CURLOPT_WRITEDATA, &im));
  set(curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Impl::on_header));
  set(curl_easy_setopt(e, CURLOPT_HEADERDATA, &im));
  set(curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L));
  // Detect dead peers on long-lived (watch) connections.
  set(curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L));
  set(curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L));
  set(curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L));
  set(curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L));
  set(curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http"));
  if (rc != CURLE_OK) return Error(std::string("cannot configure libcurl: ") + curl_easy_strerror(rc));

  const std::string what = "TLS setup for " + config.source;
  auto blob_opt = [&](CURLoption opt, const std::string& pem, const char* field) -> Status {
    curl_blob blob{};
    blob.data = const_cast<char*>(pem.data());  // NOLINT(cppcoreguidelines-pro-type-const-cast): copied
    blob.len = pem.size();
    blob.flags = CURL_BLOB_COPY;
    const CURLcode r = curl_easy_setopt(e, opt, &blob);
    if (r != CURLE_OK) return Error(what + ": cannot use " + field + ": " + curl_easy_strerror(r));
    return {};
  };
  auto str_opt = [&](CURLoption opt, const std::string& v, const char* field) -> Status {
    const CURLcode r = curl_easy_setopt(e, opt, v.c_str());
    if (r != CURLE_OK) return Error(what + ": cannot use " + field + ": " + curl_easy_strerror(r));
    return {};
  };
  Status st;
  if (!config.ca_data.empty()) {
    st = blob_opt(CURLOPT_CAINFO_BLOB, config.ca_data, "certificate-authority-data");
  } else if (!config.ca_file.empty()) {
    st = str_opt(CURLOPT_CAINFO, config.ca_file, "certificate-authority");
  }
  if (!st) return st.error();
  if (!config.client_cert_data.empty()) {
    st = blob_opt(CURLOPT_SSLCERT_BLOB, config.client_cert_data, "client-certificate-data");
  } else if (!config.client_cert_file.empty()) {
    st = str_opt(CURLOPT_SSLCERT, config.client_cert_file, "client-certificate");
  }
  if (!st) return st.error();
  if (!config.client_key_data.empty()) {
    st = blob_opt(CURLOPT_SSLKEY_BLOB, config.client_key_data, "client-key-data");
  } else if (!config.client_key_file.empty()) {
    st = str_opt(CURLOPT_SSLKEY, config.client_key_file, "client-key");
  }
  if (!st) return st.error();
  curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
  curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
  const long verify = config.insecure_skip_tls_verify ? 0L : 1L;
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, verify);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, verify * 2L);
  return c;
}

std::string HttpConnection::escape(std::string_view s) {
  char* out = curl_easy_escape(nullptr, s.data(), static_cast<int>(s.size()));
  if (out == nullptr) return std::string(s);
  std::string r(out);
  curl_free(out);
  return r;
}

HttpResponse HttpConnection::perform(const HttpRequest& request) {
  HttpResponse resp;
  Impl& im = *impl_;
  im.req = &request;
  im.resp = &resp;
  im.errbuf[0] = '\0';
  CURL* e = im.easy;

  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for larger bodies
  if (!request.bearer_token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + request.bearer_token).c_str());
  }
  if (!request.content_type.empty()) {
    headers = curl_slist_append(headers, ("Content-Type: " + request.content_type).c_str());
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(e, CURLOPT_URL, request.url.c_str());
  const bool has_body = !request.body.empty() || request.method == "POST" || request.method == "PUT" ||
                        request.method == "PATCH";
  if (has_body) {
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, request.method == "POST" ? nullptr : request.method.c_str());
  } else {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, request.method == "GET" ? nullptr : request.method.c_str());
  }
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));

  CURLcode result = CURLE_OK;
  bool finished = false;
  std::string multi_error;
  const int poll_ms = static_cast<int>(std::max<int64_t>(1, request.poll_interval.count()));
  curl_multi_add_handle(im.multi, e);
  while (true) {
    int running = 0;
    const CURLMcode mc = curl_multi_perform(im.multi, &running);
    if (mc != CURLM_OK) {
      multi_error = curl_multi_strerror(mc);
      break;
    }
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(im.multi, &left)) {
      if (m->msg == CURLMSG_DONE && m->easy_handle == e) {
        result = m->data.result;
        finished = true;
      }
    }
    if (finished || resp.aborted) break;
    bool keep_going = true;
    try {
      keep_going = !request.keep_going || request.keep_going();
    } catch (...) {
      im.callback_error = std::current_exception();
      keep_going = false;
    }
    if (!keep_going) {
      resp.aborted = true;
      break;
    }
    curl_multi_poll(im.multi, nullptr, 0, poll_ms, nullptr);
  }
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &resp.status);
  // Removing an unfinished transfer closes its connection; a finished one stays cached for reuse.
  curl_multi_remove_handle(im.multi, e);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, nullptr);
  curl_slist_free_all(headers);
  im.req = nullptr;
  im.resp = nullptr;
  if (im.callback_error) std::rethrow_exception(std::exchange(im.callback_error, nullptr));

  if (resp.aborted) return resp;
  if (!multi_error.empty()) {
    resp.transport_error = multi_error;
  } else if (result != CURLE_OK) {
    // The error buffer has the specifics (address, TLS reason); the generic text is the fallback.
    resp.transport_error = im.errbuf[0] != '\0' ? std::string(im.errbuf) : curl_easy_strerror(result);
    if (result == CURLE_OPERATION_TIMEDOUT) {
      resp.transport_error = "timed out (" + resp.transport_error + ")";  // curl's wording varies by phase
    }
  }
  return resp;
}

}  // namespace dm::kube
