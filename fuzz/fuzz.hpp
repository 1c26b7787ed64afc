#pragma once

// Shared by the fuzz targets. Each target defines LLVMFuzzerTestOneInput; built with
// clang's -fsanitize=fuzzer it is a libFuzzer binary, otherwise it links
// corpus_main.cpp and replays a seed corpus as a CTest regression test. A target
// returns normally for every input the library handles as documented (a value, or a
// beehive::Error with an expected code) and aborts otherwise, so both drivers report it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <beehive/errors.hpp>

namespace beehive::fuzz {

/// Stops the run: libFuzzer saves the input, the corpus replay fails the test.
[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "fuzz: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

/// Aborts unless `e` carries one of the codes the target allows for bad input.
inline void expect_code(const Error& e, std::initializer_list<errc> allowed) {
  for (auto c : allowed)
    if (e.value() == c) return;
  fail(std::string("unexpected error: ") + e.what());
}

/// Splits the input at NUL bytes into at most `n` fields (missing ones are empty).
inline std::vector<std::string> fields(const std::uint8_t* data, std::size_t size, std::size_t n) {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && out.size() < n)
      out.emplace_back();
    else
      out.back().push_back(static_cast<char>(data[i]));
  }
  out.resize(n);
  return out;
}

}  // namespace beehive::fuzz
