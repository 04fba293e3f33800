#include "base/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace moesim {
namespace {

std::string nested(int depth, char open, char close) {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(JsonDepth, AcceptsTheLimitAndRefusesOneMore) {
  EXPECT_NO_THROW(parse_json(nested(kMaxJsonDepth, '[', ']')));
  EXPECT_THROW(parse_json(nested(kMaxJsonDepth + 1, '[', ']')), JsonDepthError);
  // Objects count too, mixed with arrays.
  std::string mixed;
  for (int i = 0; i < kMaxJsonDepth; ++i) mixed += i % 2 ? "[" : "{\"k\":";
  mixed += "[1]";
  for (int i = kMaxJsonDepth - 1; i >= 0; --i) mixed += i % 2 ? "]" : "}";
  EXPECT_THROW(parse_json(mixed), JsonDepthError);
}

TEST(JsonDepth, RefusesEvenWithoutExceptionsAndParsesAsBefore) {
  // A million levels: refused at level 65, without recursion.
  EXPECT_THROW(parse_json(nested(1000000, '[', ']'), false), JsonDepthError);
  EXPECT_TRUE(parse_json(std::string("{\"a\": [1, {\"b\": 2}]}"))["a"][1]["b"] == 2);
  EXPECT_TRUE(parse_json(std::string("{\"a\": "), false).is_discarded());
  EXPECT_THROW(parse_json(std::string("{\"a\": ")), nlohmann::json::parse_error);
}

}  // namespace
}  // namespace moesim
