#include "GoldenHarness.h"

#include "ir/Equivalence.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <fstream>

namespace graphc::golden {

std::vector<std::string> inputs(const std::string &dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef path = it->path();
    if (path.endswith(".gir") && !path.endswith(".expected.gir"))
      files.push_back(path.drop_front(dir.size() + 1).str());
  }
  llvm::sort(files);
  return files;
}

std::string headerValue(llvm::StringRef text, llvm::StringRef key) {
  llvm::SmallVector<llvm::StringRef, 0> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (!line.consume_front("#"))
      continue;
    line = line.ltrim();
    if (!line.consume_front(key))
      continue;
    line = line.ltrim();
    if (line.consume_front(":"))
      return line.trim().str();
  }
  return "";
}

std::string lineDiff(llvm::StringRef expected, llvm::StringRef actual) {
  llvm::SmallVector<llvm::StringRef, 0> a, b;
  expected.split(a, '\n');
  actual.split(b, '\n');
  size_t n = a.size(), m = b.size();
  std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::string out;
  for (size_t i = 0, j = 0; i < n || j < m;) {
    if (i < n && j < m && a[i] == b[j])
      ++i, ++j;
    else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]))
      out += "- " + a[i++].str() + "\n";
    else
      out += "+ " + b[j++].str() + "\n";
  }
  return out;
}

void check(const std::string &dir, const std::string &relPath, const RunFn &run) {
  std::string input = dir + "/" + relPath;
  std::string expectedPath = input.substr(0, input.size() - 4) + ".expected.gir";
  auto buffer = llvm::MemoryBuffer::getFile(input);
  ASSERT_TRUE(bool(buffer)) << input;
  llvm::StringRef text = (*buffer)->getBuffer();
  std::string pipeline = headerValue(text, "pipeline");
  if (pipeline.empty())
    pipeline = llvm::sys::path::filename(llvm::sys::path::parent_path(input)).str();

  auto m = parseModule(text, input);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  llvm::Error err = run(**m, pipeline, headerValue(text, "options"));
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  std::string actual = toText(**m);

  const char *update = std::getenv("GRAPHC_UPDATE_GOLDENS");
  if (update && std::string(update) == "1") {
    std::ofstream(expectedPath) << actual;
    GTEST_SKIP() << "rewrote " << expectedPath;
  }
  auto expected = parseModuleFile(expectedPath);
  ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError())
                              << "\n(run with GRAPHC_UPDATE_GOLDENS=1 to create it)";
  std::string why;
  if (!structurallyEqual(**expected, **m, &why))
    ADD_FAILURE() << relPath << " after '" << pipeline << "': " << why << "\n"
                  << lineDiff(toText(**expected), actual);
}

std::string testName(const ::testing::TestParamInfo<std::string> &info) {
  std::string name = info.param.substr(0, info.param.size() - 4);
  for (char &c : name)
    if (!llvm::isAlnum(c))
      c = '_';
  return name;
}

} // namespace graphc::golden
