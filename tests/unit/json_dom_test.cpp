// Tests of detail::JsonDom (src/report/json_dom.hpp): the tree read_run_file parses into is
// the one nlohmann::json::parse builds, and freeing it allocates nothing — also after the
// parse ran out of memory half-way (issue 25: nlohmann's own destructor allocates, and threw
// std::bad_alloc from a destructor: std::terminate). This binary replaces the global operator
// new to count allocations and to make them fail on demand.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>

#include "report/json_dom.hpp"

namespace {

// Allocations counted while `counting`; while `failing`, every allocation after the first
// `fail_after` fails.
bool counting = false;
long allocations = 0;
bool failing = false;
long fail_after = 0;

}  // namespace

void* operator new(std::size_t size) {
  if (counting) ++allocations;
  if (failing && fail_after-- <= 0) throw std::bad_alloc();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace genscope::detail {
namespace {

using nlohmann::json;

std::string golden_run_text() {
  std::ifstream in(std::string(GENSCOPE_SOURCE_DIR) + "/tests/cli/golden/run.json");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Arrays of arrays of objects: wide and nested, as a run document's series and steps are.
std::string nested_text() {
  json j = json::object();
  for (int i = 0; i < 50; ++i) {
    json row = json::array();
    for (int k = 0; k < 40; ++k) {
      row.push_back({{"v", k}, {"s", "text " + std::to_string(k)}, {"a", {1, 2.5, nullptr, true}}});
    }
    j["rows"].push_back(row);
  }
  return j.dump();
}

TEST(JsonDom, BuildsTheTreeNlohmannParseBuilds) {
  const std::string texts[] = {golden_run_text(), nested_text(), "[1,-2,3.5,\"x\",{\"a\":{}}]",
                               "{\"k\":1,\"k\":2}", "17"};
  for (const std::string& text : texts) {
    JsonDom dom;
    ASSERT_EQ(parse_json_dom(text, dom), "") << text.substr(0, 80);
    EXPECT_EQ(dom.value, json::parse(text)) << text.substr(0, 80);
  }
}

TEST(JsonDom, FreeingAllocatesNothingWhereNlohmannsDestructorDoes) {
  const std::string text = nested_text();
  {
    JsonDom dom;
    ASSERT_EQ(parse_json_dom(text, dom), "");
    allocations = 0;
    counting = true;
    JsonDom::release(dom.value);
    counting = false;
    EXPECT_EQ(allocations, 0);
    EXPECT_TRUE(dom.value.empty());
  }
  // What it replaces: nlohmann::json's destructor allocates a stack of the children.
  {
    json plain = json::parse(text);
    allocations = 0;
    counting = true;
    plain = nullptr;
    counting = false;
    EXPECT_GT(allocations, 0);
  }
}

TEST(JsonDom, RunningOutOfMemoryWhileParsingIsBadAllocAndTheHalfTreeFreesWithoutMemory) {
  const std::string text = nested_text();
  // Fail at many points of the parse; every allocation after the failure fails too, the
  // freeing of what was built included: a destructor that allocated would end the test
  // binary (std::terminate) instead of passing.
  for (long n : {0L, 1L, 5L, 40L, 300L, 2000L, 5000L}) {
    bool threw = false;
    fail_after = n;
    failing = true;
    try {
      JsonDom dom;
      parse_json_dom(text, dom);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    failing = false;
    EXPECT_TRUE(threw) << "failing after " << n << " allocations";
  }
}

TEST(JsonDom, SyntaxErrorsAndDeepNestingAreNamed) {
  JsonDom bad;
  EXPECT_NE(parse_json_dom("{\"a\": [1, 2", bad), "");
  JsonDom deep;
  const std::string nested =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_NE(parse_json_dom(nested, deep).find("nested deeper than 1000 levels"),
            std::string::npos);
  JsonDom deepest;
  const std::string limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(parse_json_dom(limit, deepest), "");
}

}  // namespace
}  // namespace genscope::detail
