#pragma once

// A write engine of its own on the test store (a second open of it): group commits
// handed to it as the store_writer hands them over, without callers.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <beehive/commit_record.hpp>

#include "fixture.hpp"
#include "store/backend.hpp"
#include "store/write_engine.hpp"
#include "support/test_store.hpp"

namespace beehive::test {

struct GroupEngine {
  explicit GroupEngine(const std::filesystem::path& db) : store(open_test_store(db)) {
    store::WriteEngineConfig cfg;
    cfg.writer = store::backend_of(*store).open_writer();
    cfg.clock = std::make_shared<SystemClock>();
    cfg.watch_foreign_commits = false;
    cfg.publish = [this](const commit_record& r) { records.push_back(r); };
    engine = std::make_unique<store::WriteEngine>(std::move(cfg));
  }
  /// Commits `ops` as one group; returns each write's outcome.
  std::vector<store::GroupedWrite> commit(const std::vector<store::WriteOp>& ops) {
    std::vector<store::GroupedWrite> writes;
    for (auto& op : ops) writes.push_back({&op});
    engine->commit_group(writes, {});
    return writes;
  }
  /// Two groups, the second committed with the next transaction begun ahead (as the
  /// writer begins it when callers write back to back); returns the second's writes.
  std::vector<store::GroupedWrite> commit_beginning_ahead() {
    for (auto& w : commit({create("warm-1"), create("warm-2")})) EXPECT_TRUE(w.reply) << w.what;
    engine->writer().begin_ahead();
    auto writes = commit({create("a"), create("b")});
    for (auto& w : writes) EXPECT_TRUE(w.reply) << w.what;
    return writes;
  }
  static store::WriteOp create(const std::string& slug, const Labels& labels = {}) {
    create_request r{widget_kind, R"({"color":")" + slug + R"(","size":1})", slug};
    r.labels = labels;
    return r;
  }
  std::shared_ptr<Store> store;
  std::vector<commit_record> records;
  std::unique_ptr<store::WriteEngine> engine;
};

}  // namespace beehive::test
