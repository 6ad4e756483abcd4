//===- TensorBoardTest.cpp - TensorBoard event files (issue 32) -----------===//
//
// tools/driver/TensorBoard.h: CRC-32C against published vectors, and a
// written event file read back here: its TFRecord framing (both checksums of
// every record) and its Events, decoded from the protobuf wire format by hand
// (not by the generated classes that wrote them), so the field numbers and
// types are checked against the format rather than against themselves.
//
//===----------------------------------------------------------------------===//
#include "tools/driver/TensorBoard.h"
#include "ir/OutputFile.h"
#include "tools/driver/Progress.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

using namespace graphc;

namespace {

TEST(TensorBoard, Crc32cKnownValues) {
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  // RFC 3720 (iSCSI), B.4: 32 bytes of zeros, of ones, ascending.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i)
    ascending.push_back((char)i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  // Rotated right by 15 bits, plus 0xA282EAD8.
  EXPECT_EQ(maskedCrc32c("123456789"), 0xC78AB0E5u);
}

uint64_t littleEndian(llvm::StringRef bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;)
    v = v << 8 | (unsigned char)bytes[i];
  return v;
}

/// One field of a protobuf message: its number and, by wire type, its
/// integer (varint, fixed32, fixed64) or its bytes (length-delimited).
struct Field {
  int number = 0, wireType = 0;
  uint64_t integer = 0;
  std::string bytes;
};

/// The fields of a message, in order; ADD_FAILUREs on a malformed one.
std::vector<Field> decodeMessage(llvm::StringRef m) {
  std::vector<Field> fields;
  size_t at = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; at < m.size(); shift += 7) {
      unsigned char b = m[at++];
      v |= (uint64_t)(b & 0x7F) << shift;
      if (!(b & 0x80))
        return v;
    }
    ADD_FAILURE() << "a varint runs past the message";
    return v;
  };
  while (at < m.size()) {
    uint64_t key = varint();
    Field f;
    f.number = (int)(key >> 3);
    f.wireType = (int)(key & 7);
    if (f.wireType == 0) {
      f.integer = varint();
    } else if (f.wireType == 1 || f.wireType == 5) {
      size_t n = f.wireType == 1 ? 8 : 4;
      if (at + n > m.size()) {
        ADD_FAILURE() << "a fixed field runs past the message";
        break;
      }
      f.integer = littleEndian(m.substr(at, n));
      at += n;
    } else if (f.wireType == 2) {
      size_t n = varint();
      if (at + n > m.size()) {
        ADD_FAILURE() << "a length-delimited field runs past the message";
        break;
      }
      f.bytes = m.substr(at, n).str();
      at += n;
    } else {
      ADD_FAILURE() << "wire type " << f.wireType;
      break;
    }
    fields.push_back(f);
  }
  return fields;
}

/// The data of each TFRecord of `file`, each checksum checked.
std::vector<std::string> readRecords(llvm::StringRef file) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    if (at + 12 > file.size()) {
      ADD_FAILURE() << "a record's header is cut off at byte " << at;
      break;
    }
    llvm::StringRef length = file.substr(at, 8);
    EXPECT_EQ(littleEndian(file.substr(at + 8, 4)), maskedCrc32c(length)) << "at byte " << at;
    uint64_t n = littleEndian(length);
    if (at + 12 + n + 4 > file.size()) {
      ADD_FAILURE() << "a record's data is cut off at byte " << at;
      break;
    }
    llvm::StringRef data = file.substr(at + 12, n);
    EXPECT_EQ(littleEndian(file.substr(at + 12 + n, 4)), maskedCrc32c(data)) << "at byte " << at;
    records.push_back(data.str());
    at += 12 + n + 4;
  }
  return records;
}

double asDouble(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

float asFloat(uint64_t bits) {
  uint32_t b = (uint32_t)bits;
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

/// An Event: wall_time (1, double), step (2, varint), file_version (3,
/// string), summary (5: values (1) of tag (1, string) and simple_value (2,
/// float)), session_log (7: status (1, varint; START is 1)).
struct Event {
  double wallTime = 0;
  int64_t step = 0;
  std::string fileVersion;
  std::optional<uint64_t> sessionStatus;
  std::map<std::string, float> scalars;
};

Event decodeEvent(llvm::StringRef data) {
  Event e;
  for (const Field &f : decodeMessage(data)) {
    if (f.number == 1 && f.wireType == 1)
      e.wallTime = asDouble(f.integer);
    else if (f.number == 2 && f.wireType == 0)
      e.step = (int64_t)f.integer;
    else if (f.number == 3 && f.wireType == 2)
      e.fileVersion = f.bytes;
    else if (f.number == 7 && f.wireType == 2)
      for (const Field &s : decodeMessage(f.bytes)) {
        EXPECT_TRUE(s.number == 1 && s.wireType == 0) << "session log field " << s.number;
        e.sessionStatus = s.integer;
      }
    else if (f.number == 5 && f.wireType == 2)
      for (const Field &value : decodeMessage(f.bytes)) {
        EXPECT_EQ(value.number, 1);
        std::string tag;
        std::optional<float> simple;
        for (const Field &v : decodeMessage(value.bytes)) {
          if (v.number == 1 && v.wireType == 2)
            tag = v.bytes;
          else if (v.number == 2 && v.wireType == 5)
            simple = asFloat(v.integer);
          else
            ADD_FAILURE() << "summary value field " << v.number;
        }
        EXPECT_TRUE(simple.has_value()) << tag << " has no simple_value";
        e.scalars[tag] = simple.value_or(-1);
      }
    else
      ADD_FAILURE() << "event field " << f.number << " of wire type " << f.wireType;
  }
  return e;
}

TEST(TensorBoard, TfRecordFraming) {
  std::string r = tfRecord("abc");
  ASSERT_EQ(r.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(littleEndian(llvm::StringRef(r).substr(0, 8)), 3u);
  EXPECT_EQ(llvm::StringRef(r).substr(12, 3), "abc");
  EXPECT_EQ(readRecords(r), std::vector<std::string>{"abc"});
}

TEST(TensorBoard, WritesEventsTensorBoardReads) {
  tempdir::TempDir tmp;
  const std::string dir = tmp.file("runs/a");
  auto w = TensorBoardWriter::open(dir, 1);
  ASSERT_TRUE(bool(w)) << llvm::toString(w.takeError());
  StepRecord first{1, 0, 2.5, 0.1, 0.5, 64, 0, {}, std::nullopt, std::nullopt, std::nullopt};
  StepRecord second{2, 0, 2.25, 0.05, 0.5, 128, 0, {}, std::nullopt, 32768.0, 0};
  ASSERT_FALSE(bool((*w)->step(first)));
  ASSERT_FALSE(bool((*w)->step(second)));
  // A zero is written too (proto3 would leave out a plain field of 0).
  ASSERT_FALSE(bool((*w)->eval(2, 0.0, 1.75)));
  ASSERT_FALSE(bool((*w)->close()));

  std::vector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    names.push_back(llvm::sys::path::filename(it->path()).str());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_TRUE(llvm::StringRef(names[0]).startswith("events.out.tfevents.")) << names[0];
  EXPECT_EQ(dir + "/" + names[0], (*w)->path());

  std::vector<std::string> records = readRecords(tempdir::fileText((*w)->path()));
  ASSERT_EQ(records.size(), 5u);
  std::vector<Event> events;
  for (const std::string &r : records)
    events.push_back(decodeEvent(r));
  EXPECT_EQ(events[0].fileVersion, "brain.Event:2");
  EXPECT_TRUE(events[0].scalars.empty());
  EXPECT_FALSE(events[0].sessionStatus);
  // The run starts at its first step (SessionLog START).
  EXPECT_EQ(events[1].sessionStatus, 1u);
  EXPECT_EQ(events[1].step, 1);
  EXPECT_TRUE(events[1].scalars.empty());
  events.erase(events.begin());
  for (const Event &e : events)
    EXPECT_GT(e.wallTime, 1.5e9); // seconds since 1970, after 2017
  EXPECT_EQ(events[1].step, 1);
  EXPECT_EQ(events[1].scalars, (std::map<std::string, float>{{"train/loss", 2.5f},
                                                             {"train/learning_rate", 0.1f},
                                                             {"train/images_per_second", 64.f}}));
  EXPECT_EQ(events[2].step, 2);
  EXPECT_EQ(events[2].scalars, (std::map<std::string, float>{{"train/loss", 2.25f},
                                                             {"train/learning_rate", 0.05f},
                                                             {"train/images_per_second", 128.f},
                                                             {"train/loss_scale", 32768.f}}));
  EXPECT_EQ(events[3].step, 2);
  EXPECT_EQ(events[3].scalars,
            (std::map<std::string, float>{{"eval/accuracy", 0.f}, {"eval/loss", 1.75f}}));
}

TEST(TensorBoard, SecondWriterAddsAFile) {
  tempdir::TempDir tmp;
  auto a = TensorBoardWriter::open(tmp.str(), 1);
  auto b = TensorBoardWriter::open(tmp.str(), 1);
  ASSERT_TRUE(a && b);
  EXPECT_NE((*a)->path(), (*b)->path());
  EXPECT_LT((*a)->path(), (*b)->path()); // the later run's file sorts after
  ASSERT_FALSE(bool((*a)->close()));
  ASSERT_FALSE(bool((*b)->close()));
  EXPECT_EQ(tmp.files().size(), 2u);
}

TEST(TensorBoard, DirectoryThatCannotBeCreated) {
  tempdir::TempDir tmp;
  ASSERT_FALSE(bool(writeOutputFile(tmp.file("plain"), "a file, not a directory\n")));
  auto w = TensorBoardWriter::open(tmp.file("plain/runs"), 1);
  ASSERT_FALSE(bool(w));
  std::string message = llvm::toString(w.takeError());
  EXPECT_NE(message.find("--tensorboard " + tmp.file("plain/runs")), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

} // namespace
