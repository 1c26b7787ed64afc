// with_logger: the entries an operator needs, with structured fields.

#include "controller_fixture.hpp"

namespace beehive::test {
namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::tuple<LogLevel, std::string, LogFields>> entries;
  bool has(const std::string& needle, const std::string& key, const std::string& value) {
    std::lock_guard lk(mu);
    for (auto& [level, message, fields] : entries)
      if (message.find(needle) != std::string::npos)
        for (auto& [k, v] : fields)
          if (k == key && v == value) return true;
    return false;
  }
};

class LoggerTest : public ControllerTest {
 protected:
  void SetUp() override {
    open(with_logger([c = captured_](LogLevel l, std::string_view m, const LogFields& f) {
      std::lock_guard lk(c->mu);
      c->entries.emplace_back(l, std::string(m), f);
    }));
  }
  std::shared_ptr<Captured> captured_ = std::make_shared<Captured>();
};

TEST_F(LoggerTest, FailedReconcilesAreLoggedWithTheObjectKindReasonAndRetry) {
  recorder_->set_body(
      [](auto&, auto&, auto&) -> Result { throw std::runtime_error("dial timeout"); });
  register_widgets();
  auto o = widgets().create(ctx_, {"a", 1});
  start();
  EXPECT_TRUE(eventually([&] {
    return captured_->has("reconcile failed", "id", std::to_string(o.id)) &&
           captured_->has("reconcile failed", "kind", "Widget.acme.com") &&
           captured_->has("reconcile failed", "reason", "dial timeout") &&
           captured_->has("reconcile failed", "retry_in_ms", "1000");
  }));
}

TEST_F(LoggerTest, SkippedRowsAndStderrDefault) {
  auto w = widgets();
  Client<nlohmann::json, nlohmann::json> raw(*bh_, widget_kind);
  auto bad = raw.create(ctx_, nlohmann::json{{"not", "a widget"}});
  EXPECT_TRUE(w.list(ctx_).empty());
  EXPECT_TRUE(captured_->has("does not decode", "id", std::to_string(bad.id)));
  // The default logger writes warnings and errors to stderr, one line each.
  ::testing::internal::CaptureStderr();
  stderr_logger()(LogLevel::warning, "something", {{"id", "7"}});
  stderr_logger()(LogLevel::info, "quiet", {});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "beehive: something id=7\n");
  // One line whatever the text: a value with spaces is quoted, quotes and backslashes
  // escaped, control and bidirectional characters written as escapes.
  ::testing::internal::CaptureStderr();
  stderr_logger()(LogLevel::error, "failed\n\x1b[2J",
                  {{"reason", "postgres: ERROR:  x\nDETAIL: \"y\" \\n"},
                   {"kind", "K\xe2\x80\xae"},
                   {"empty", ""},
                   {"eq", "a=b"}});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "beehive: failed\\n\\x1b[2J reason=\"postgres: ERROR:  x\\nDETAIL: \\\"y\\\" \\\\n\" "
            "kind=\"K\\u202e\" empty=\"\" eq=\"a=b\"\n");
  // Nor can a key or a message forge a line or a field.
  ::testing::internal::CaptureStderr();
  stderr_logger()(LogLevel::error, "x id=7", {{"k\nbeehive: forged", "v"}, {"a b=\"c", "d"}});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "beehive: \"x id=7\" k_nbeehive:_forged=v a_b__c=d\n");
  // Nor a line separator a viewer breaks at, a bidirectional mark, or a byte that is not
  // UTF-8 (a lone 0x9b is the 8-bit CSI to a terminal); the rest of the text is kept.
  ::testing::internal::CaptureStderr();
  stderr_logger()(LogLevel::error, "m",
                  {{"reason",
                    "bad\xe2\x80\xa8"
                    "beehive: forged"},
                   {"rlm",
                    "a\xe2\x80\x8f"
                    "b"},
                   {"byte",
                    "x\x9b"
                    "31m"},
                   {"cut", "\xe2\x80"},
                   {"kept", "caf\xc3\xa9\xf0\x9f\x90\x9d"}});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "beehive: m reason=\"bad\\u2028beehive: forged\" rlm=\"a\\u200fb\" "
            "byte=\"x\\x9b31m\" cut=\"\\xe2\\x80\" kept=caf\xc3\xa9\xf0\x9f\x90\x9d\n");
}

// An empty Logger (a default-constructed std::function) keeps the default, stderr,
// rather than being called (and throwing) or silencing beehive.
class EmptyLoggerTest : public ControllerTest {
 protected:
  void SetUp() override { open(with_logger(Logger{})); }
};

TEST_F(EmptyLoggerTest, KeepsTheStderrDefault) {
  Client<nlohmann::json, nlohmann::json> raw(*bh_, widget_kind);
  auto bad = raw.create(ctx_, nlohmann::json{{"not", "a widget"}});
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(widgets().list(ctx_).empty());
  auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("beehive: "), std::string::npos) << err;
  EXPECT_NE(err.find("id=" + std::to_string(bad.id)), std::string::npos) << err;
}

}  // namespace
}  // namespace beehive::test
