// A commit's note (store/commit_note.hpp): what another process gets of a commit with
// its notification, and when the record stays behind so that it reads the change log.

#include <gtest/gtest.h>

#include "store/commit_note.hpp"

namespace beehive::test {
namespace {

using store::read_commit_note;
using store::trusted_commit_note;

const store::NoteKey kKey("0123456789abcdef0123456789abcdef");

std::string write_commit_note(std::int64_t session, std::int64_t after, std::int64_t through,
                              const commit_record* rec) {
  return store::write_commit_note(session, after, through, rec, kKey);
}

ObjectRow row(ObjectID id, std::string spec) {
  ObjectRow r;
  r.meta.id = id;
  r.meta.group = "acme.com";
  r.meta.kind = "Widget";
  r.meta.slug = "w" + std::to_string(id);
  r.meta.generation = 3;
  r.meta.resource_version = 40 + id;
  r.meta.labels = {{"tier", "gold"}};
  r.meta.finalizers = {"acme.com/cleanup"};
  r.meta.conditions.push_back(
      {"Ready", ConditionStatus::True, "Done", "all \"good\"\n\tat C:\\ \x01 \x7f é", false, 3,
       from_millis(1000)});
  r.meta.created_at = from_millis(500);
  r.meta.updated_at = from_millis(900);
  r.spec = std::move(spec);
  r.spec_version = 2;
  r.status = R"({"phase":"up"})";
  return r;
}

commit_record sample() {
  commit_record rec;
  rec.changes.push_back({ChangeType::Modified, row(1, R"({"size":2})"),
                         object_change::spec | object_change::labels, Ref{7, "acme.com", "Rack"}});
  rec.changes.push_back(
      {ChangeType::Deleted, row(2, R"({"size":"\n\"quoted\""})"), object_change::removed});
  rec.wakes = {Ref{3, "acme.com", "Widget"}};
  rec.requeues = {Ref{4, "acme.com", "Widget"}};
  rec.backoff_resets = {Ref{4, "acme.com", "Widget"}};
  rec.edges_removed = true;
  return rec;
}

TEST(CommitNote, ARecordTravelsWithTheVersionsItTookAndReadsBackWhole) {
  auto rec = sample();
  auto note = read_commit_note(write_commit_note(12, 40, 43, &rec));
  EXPECT_EQ(note.session, 12);
  EXPECT_EQ(note.after, 40);
  EXPECT_EQ(note.through, 43);
  ASSERT_TRUE(note.record);
  ASSERT_EQ(note.record->changes.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& got = note.record->changes[i];
    const auto& sent = rec.changes[i];
    EXPECT_EQ(got.type, sent.type);
    EXPECT_EQ(got.parts, sent.parts);
    EXPECT_EQ(got.owner, sent.owner);
    EXPECT_EQ(got.row.spec, sent.row.spec);
    EXPECT_EQ(got.row.status, sent.row.status);
    EXPECT_EQ(got.row.spec_version, sent.row.spec_version);
    EXPECT_EQ(got.row.meta.slug, sent.row.meta.slug);
    EXPECT_EQ(got.row.meta.labels, sent.row.meta.labels);
    EXPECT_EQ(got.row.meta.finalizers, sent.row.meta.finalizers);
    EXPECT_EQ(got.row.meta.conditions, sent.row.meta.conditions);
    EXPECT_EQ(got.row.meta.resource_version, sent.row.meta.resource_version);
    EXPECT_EQ(got.row.meta.updated_at, sent.row.meta.updated_at);
  }
  EXPECT_EQ(note.record->wakes, rec.wakes);
  EXPECT_EQ(note.record->requeues, rec.requeues);
  EXPECT_EQ(note.record->backoff_resets, rec.backoff_resets);
  EXPECT_TRUE(note.record->edges_removed);
}

// Anyone who may connect may notify on the channel: only a record signed with the
// schema's key is passed on.
TEST(CommitNote, OnlyARecordSignedWithTheKeyIsTrusted) {
  auto rec = sample();
  auto text = write_commit_note(12, 40, 43, &rec);
  EXPECT_EQ(trusted_commit_note(text, kKey), text);
  EXPECT_TRUE(read_commit_note(trusted_commit_note(text, kKey)).record);

  auto header = std::string("12 40 43");
  EXPECT_EQ(trusted_commit_note(text, store::NoteKey("another key of the same length!!")), header);
  auto tampered = text;
  tampered.replace(tampered.find("\"w\":[[3,"), 8, "\"w\":[[5,");  // wakes another object
  EXPECT_EQ(trusted_commit_note(tampered, kKey), header);
  auto resigned = text;  // the header changed under the body's signature
  resigned.replace(0, header.size(), "12 40 44");
  EXPECT_EQ(trusted_commit_note(resigned, kKey), "12 40 44");
  auto unsigned_note = header + "\n" + text.substr(text.find('\n') + 1);
  EXPECT_EQ(trusted_commit_note(unsigned_note, kKey), header);
  // What the listener passes on reads as a note without a record.
  auto passed = read_commit_note(trusted_commit_note(tampered, kKey));
  EXPECT_EQ(passed.through, 43);
  EXPECT_FALSE(passed.record);
  // No key, no record.
  EXPECT_EQ(store::write_commit_note(12, 40, 43, &rec, store::NoteKey()), header);
  EXPECT_EQ(trusted_commit_note(text, store::NoteKey()), header);
}

// A record whose versions lie outside those its note says the commit took is not a
// commit's: it is dropped, and the receiver reads the log.
TEST(CommitNote, ARecordWithAVersionOutsideItsCommitsIsDropped) {
  auto rec = sample();  // versions 41 and 42
  EXPECT_FALSE(read_commit_note(write_commit_note(12, 41, 43, &rec)).record);
  EXPECT_FALSE(read_commit_note(write_commit_note(12, 40, 41, &rec)).record);
  EXPECT_TRUE(read_commit_note(write_commit_note(12, 40, 42, &rec)).record);
}

TEST(CommitNote, WhatEachReceiverMustReadForItselfStaysBehind) {
  // Event runs are read with a cursor of their own; a liveness condition's status
  // depends on the process that reads it.
  auto with_run = sample();
  with_run.events.push_back({Event{}, 42});
  auto with_liveness = sample();
  with_liveness.changes[0].row.meta.conditions[0].liveness = true;
  for (const auto* rec : {&with_run, &with_liveness}) {
    auto note = read_commit_note(write_commit_note(12, 40, 43, rec));
    EXPECT_EQ(note.after, 40);
    EXPECT_EQ(note.through, 43);
    EXPECT_FALSE(note.record);
  }
}

TEST(CommitNote, ARecordTooLargeForANotificationStaysBehind) {
  auto rec = sample();
  auto fits = write_commit_note(12, 40, 43, &rec);
  ASSERT_LT(fits.size(), store::kMaxCommitNoteBytes);
  // Grown to exactly the limit, then past it.
  rec.changes[0].row.spec = R"({"pad":")" + std::string(store::kMaxCommitNoteBytes, 'x') + "\"}";
  auto text = write_commit_note(12, 40, 43, &rec);
  EXPECT_LE(text.size(), store::kMaxCommitNoteBytes);
  auto note = read_commit_note(text);
  EXPECT_EQ(note.through, 43);
  EXPECT_FALSE(note.record);
  auto at_limit = sample();
  at_limit.changes[0].row.spec.clear();
  auto base = write_commit_note(12, 40, 43, &at_limit).size();
  at_limit.changes[0].row.spec = std::string(store::kMaxCommitNoteBytes - base, 'y');
  auto full = write_commit_note(12, 40, 43, &at_limit);
  EXPECT_EQ(full.size(), store::kMaxCommitNoteBytes);
  EXPECT_TRUE(read_commit_note(full).record);
}

TEST(CommitNote, AnOlderBuildsNoteOrOneThatDoesNotReadSaysOnlyWhatItCan) {
  auto old = read_commit_note("42");  // the session alone
  EXPECT_EQ(old.session, 42);
  EXPECT_EQ(old.after, -1);
  EXPECT_FALSE(old.record);
  EXPECT_EQ(store::commit_note_session("42"), 42);
  EXPECT_EQ(store::commit_note_session("42 1 2\n{}"), 42);
  EXPECT_FALSE(store::commit_note_session("x"));
  for (const char* bad :
       {"42 5 4", "42 1", "42 1 x", "42 1 2\n{", "42 1 2\n{\"c\":[[9,0,null,{}]]}", "42 1 2\n[]",
        "42 1 2\n{\"c\":[],\"w\":[[1]],\"q\":[],\"b\":[],\"x\":1}"}) {
    auto note = read_commit_note(bad);
    EXPECT_EQ(note.session, 42) << bad;
    EXPECT_FALSE(note.record) << bad;
  }
  auto header_only = read_commit_note("42 5 9");
  EXPECT_EQ(header_only.after, 5);
  EXPECT_EQ(header_only.through, 9);
  EXPECT_FALSE(header_only.record);
}

}  // namespace
}  // namespace beehive::test
