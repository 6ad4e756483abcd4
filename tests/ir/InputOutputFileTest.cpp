//===- InputOutputFileTest.cpp - Where bytes come from and go (issue 28) --===//
//
// The one reader (ir/InputFile.h) refuses devices, FIFOs, sockets and
// directories before reading a byte, and reads at most a file's stated size
// or the --memory-limit; the one writer (ir/OutputFile.h) reports a full
// device or a file-size limit in one line naming the file and leaves what was
// there intact. Devices are private nodes made in a temporary directory where
// the process may (as root), so a writer that wrongly renamed over its target
// could never replace the system's /dev/full.
//
//===----------------------------------------------------------------------===//
#include "ir/Archive.h"
#include "ir/InputFile.h"
#include "ir/MemoryLimit.h"
#include "ir/Npy.h"
#include "ir/OutputFile.h"
#include "ir/Parser.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

using namespace graphc;

namespace {

class FilesTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> d;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("graphc-files", d));
    dir = d.str().str();
  }
  // std::filesystem also removes the device nodes device() makes, which
  // llvm::sys::fs::remove_directories leaves (and with them the directory).
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::string path(llvm::StringRef name) const { return dir + "/" + name.str(); }

  /// A character device: a private node of /dev/zero (1,5) or /dev/full
  /// (1,7) where mknod is allowed, else the system's own (a process that may
  /// not make nodes may not rename over /dev either).
  std::string device(llvm::StringRef name, unsigned minor) const {
    std::string p = path(name);
    if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, minor)) == 0)
      return p;
    return "/dev/" + name.str();
  }

  std::string fifo(llvm::StringRef name) const {
    std::string p = path(name);
    EXPECT_EQ(::mkfifo(p.c_str(), 0644), 0);
    return p;
  }

  void write(llvm::StringRef name, llvm::StringRef bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes.str();
  }

  std::string read(llvm::StringRef name) const {
    auto buf = llvm::MemoryBuffer::getFile(path(name));
    return buf ? (*buf)->getBuffer().str() : "<missing>";
  }

  std::string dir;
};

std::string message(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "success";
}

template <typename T> std::string message(llvm::Expected<T> v) {
  return v ? "success" : llvm::toString(v.takeError());
}

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

/// Runs `body` under a file-size limit of `bytes` (SIGXFSZ ignored, as the
/// tools do), then lifts it.
template <typename F> void underFileSizeLimit(rlim_t bytes, F body) {
  ignoreFileSizeSignal();
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit lower = old;
  lower.rlim_cur = bytes;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lower), 0);
  body();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
}

} // namespace

TEST_F(FilesTest, DevicesFifosSocketsAndDirectoriesAreRefusedBeforeReading) {
  std::string zero = device("zero", 5);
  EXPECT_EQ(message(readInputFile(zero)),
            "cannot read '" + zero + "': it is a character device, not a regular file");
  // A FIFO with no writer: refused at once, not waited on.
  std::string pipe = fifo("pipe");
  EXPECT_EQ(message(readInputFile(pipe)),
            "cannot read '" + pipe + "': it is a FIFO (named pipe), not a regular file");
  std::string sock = path("sock");
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, (sockaddr *)&addr, sizeof(addr)), 0);
  EXPECT_EQ(message(readInputFile(sock)),
            "cannot read '" + sock + "': it is a socket, not a regular file");
  ::close(fd);
  EXPECT_EQ(message(readInputFile(dir)),
            "cannot read '" + dir + "': it is a directory, not a regular file");
  EXPECT_EQ(message(readInputFile(path("missing"))),
            "cannot read '" + path("missing") + "': No such file or directory");
  EXPECT_EQ(message(readInputFile(zero, "cluster file")),
            "cannot read cluster file '" + zero +
                "': it is a character device, not a regular file");
  // Where a directory is taken, a directory is fine and a device is not.
  auto isDir = isInputDirectory(dir);
  ASSERT_TRUE(bool(isDir));
  EXPECT_TRUE(*isDir);
  EXPECT_CONTAINS(message(isInputDirectory(pipe)), "not a regular file or a directory");
}

TEST_F(FilesTest, EveryReaderGoesThroughTheOneFunction) {
  std::string zero = device("zero", 5), pipe = fifo("pipe");
  for (const std::string &p : {zero, pipe}) {
    EXPECT_CONTAINS(message(parseModuleFile(p)), "not a regular file");
    EXPECT_CONTAINS(message(readNpy(p)), "not a regular file");
    EXPECT_CONTAINS(message(readArchive(p)), "not a regular file");
    EXPECT_CONTAINS(message(readArchiveHeader(p)), "not a regular file");
    EXPECT_CONTAINS(message(readModuleFile(p)), "not a regular file");
    EXPECT_FALSE(isArchiveFile(p));
  }
}

TEST_F(FilesTest, ReadsAtMostTheStatedSizeAndTheMemoryLimit) {
  write("f", "0123456789");
  auto in = openInput(path("f"));
  ASSERT_TRUE(bool(in)) << message(in.takeError());
  EXPECT_EQ(in->size(), 10u);
  auto slice = in->read(2, 3);
  ASSERT_TRUE(bool(slice));
  EXPECT_EQ((*slice)->getBuffer(), "234");
  EXPECT_EQ(message(in->read(8, 3)),
            "cannot read '" + path("f") + "': bytes 8..11 lie past its end (10 bytes)");
  // Bytes added after the open are not read.
  std::ofstream(path("f"), std::ios::app) << "more";
  auto all = in->readAll();
  ASSERT_TRUE(bool(all));
  EXPECT_EQ((*all)->getBuffer(), "0123456789");

  setMemoryLimit(8);
  EXPECT_EQ(message(readInputFile(path("f"))),
            "cannot read '" + path("f") + "': it is 14 B, more than the --memory-limit of 8 B");
  setMemoryLimit(0);
  write("empty", "");
  auto empty = readInputFile(path("empty"));
  ASSERT_TRUE(bool(empty));
  EXPECT_EQ((*empty)->getBufferSize(), 0u);
}

TEST_F(FilesTest, AFullDeviceIsOneErrorNamingTheFile) {
  std::string full = device("full", 7);
  EXPECT_EQ(message(writeOutputFile(full, "bytes")),
            "cannot write '" + full + "': No space left on device");
  struct stat st;
  ASSERT_EQ(::stat(full.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device was replaced";
  auto stream = OutputStream::open(full, /*append=*/false);
  ASSERT_TRUE(bool(stream)) << message(stream.takeError());
  EXPECT_EQ(message((*stream)->write("{\"step\":1}\n")),
            "cannot write '" + full + "': No space left on device");
  EXPECT_EQ(message((*stream)->close()), "success");
}

TEST_F(FilesTest, DevicesAndFifosAreWrittenInPlace) {
  std::string null = device("null", 3);
  EXPECT_EQ(message(writeOutputFile(null, "bytes")), "success");
  struct stat st;
  ASSERT_EQ(::stat(null.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));

  std::string pipe = fifo("pipe"), got;
  std::thread reader([&] {
    std::ifstream in(pipe, std::ios::binary);
    got.assign(std::istreambuf_iterator<char>(in), {});
  });
  EXPECT_EQ(message(writeOutputFile(pipe, llvm::ArrayRef<llvm::StringRef>{"one ", "two"})),
            "success");
  reader.join();
  EXPECT_EQ(got, "one two");
  EXPECT_EQ(message(writeOutputFile(dir, "x")), "cannot write '" + dir + "': it is a directory");
}

TEST_F(FilesTest, AFileSizeLimitKeepsWhatWasThere) {
  write("model.onnx", "the old model");
  std::string big(2 << 20, 'x');
  underFileSizeLimit(1 << 20, [&] {
    EXPECT_EQ(message(writeOutputFile(path("model.onnx"), big)),
              "cannot write '" + path("model.onnx") + "': File too large");
  });
  EXPECT_EQ(read("model.onnx"), "the old model");
  std::error_code ec;
  int entries = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    ++entries;
  EXPECT_EQ(entries, 1) << "a temporary file was left behind";
}

TEST_F(FilesTest, AStreamKeepsItsWholeRecordsOnly) {
  auto stream = OutputStream::open(path("m.jsonl"), /*append=*/false);
  ASSERT_TRUE(bool(stream));
  EXPECT_TRUE((*stream)->startedEmpty());
  std::string record(300, 'r');
  record += "\n";
  underFileSizeLimit(1000, [&] {
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(message((*stream)->write(record)), "success");
    EXPECT_EQ(message((*stream)->write(record)),
              "cannot write '" + path("m.jsonl") + "': File too large");
  });
  EXPECT_EQ(message((*stream)->close()), "success");
  EXPECT_EQ(read("m.jsonl").size(), 3 * record.size()) << "a cut record was left";
  // Appending keeps what is there, and says a header is not due.
  auto again = OutputStream::open(path("m.jsonl"), /*append=*/true);
  ASSERT_TRUE(bool(again));
  EXPECT_FALSE((*again)->startedEmpty());
}

TEST_F(FilesTest, ALinkIsFollowedAndKept) {
  write("real.gir", "old");
  ASSERT_FALSE(llvm::sys::fs::create_link(path("real.gir"), path("link.gir")));
  EXPECT_EQ(message(writeOutputFile(path("link.gir"), "new")), "success");
  EXPECT_EQ(read("real.gir"), "new");
  struct stat st;
  ASSERT_EQ(::lstat(path("link.gir").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST_F(FilesTest, ADescriptorNameIsWrittenInPlace) {
  // /dev/fd/N names this process's descriptor N: a file opened here, as a
  // shell's `> out.txt` opens the standard output.
  std::string out = path("out.txt");
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  std::string name = "/dev/fd/" + std::to_string(fd);
  EXPECT_EQ(message(writeOutputFile(name, "through the descriptor")), "success");
  ::close(fd);
  EXPECT_EQ(read("out.txt"), "through the descriptor");
}
