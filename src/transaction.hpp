#pragma once

// A `within` block's transaction as its contexts carry it: the runtime and writer
// session it runs in, and the side effects to run after the outermost commit.
//
// Thread-safety: none. It belongs to the thread running the block (BeehiveCore::write
// refuses its context on any other).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace beehive::detail {

class Transaction {
 public:
  /// Made before its session begins (so that nothing can fail between the begin and
  /// the block's rollback path): begun() names the session.
  explicit Transaction(const void* owner) : owner_(owner) {}
  void begun(std::uint64_t session) noexcept { session_ = session; }

  /// Whether the caller runs on the thread that opened the block. The block's calls
  /// (its nested blocks' savepoints above all) must come one after another, from it.
  bool on_its_thread() const { return std::this_thread::get_id() == thread_; }

  /// The runtime (BeehiveCore) whose within block opened it: the session exists on that
  /// runtime's writer only.
  const void* owner() const { return owner_; }
  std::uint64_t session() const { return session_; }

  /// Runs `fn` after the outermost commit; dropped on rollback.
  void after_commit(std::function<void()> fn) { post_commit_.push_back(std::move(fn)); }

  /// Nested block boundaries: side effects registered inside a block that rolls back
  /// are dropped with it.
  void mark() { marks_.push_back(post_commit_.size()); }
  void keep() { marks_.pop_back(); }
  void drop_to_mark() {
    post_commit_.resize(marks_.back());
    marks_.pop_back();
  }

  std::vector<std::function<void()>> take_post_commit() { return std::move(post_commit_); }

  /// Nested blocks open now (0 in the outermost block alone).
  std::size_t depth() const { return marks_.size(); }

 private:
  const void* owner_;
  std::uint64_t session_ = 0;
  std::thread::id thread_ = std::this_thread::get_id();
  std::vector<std::function<void()>> post_commit_;
  std::vector<std::size_t> marks_;
};

}  // namespace beehive::detail
