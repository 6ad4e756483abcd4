//===- DeviceIdTest.cpp - The one parser of device names --------------------===//

#include "ir/DeviceId.h"

#include <gtest/gtest.h>

using namespace graphc;

TEST(DeviceId, ParsesKindAndIndex) {
  EXPECT_EQ(DeviceId::parse("cpu:0"), DeviceId::host());
  EXPECT_EQ(DeviceId::parse("gpu:3"), DeviceId::gpu(3));
  EXPECT_EQ(DeviceId::parse("cpu:12"), DeviceId::cpu(12));
  EXPECT_EQ(DeviceId::gpu(7).str(), "gpu:7");
  EXPECT_EQ(DeviceId::host().str(), "cpu:0");
  EXPECT_TRUE(DeviceId::host().isHost());
  EXPECT_FALSE(DeviceId::cpu(1).isHost());
  EXPECT_TRUE(DeviceId::gpu(0).isGpu());
  EXPECT_LT(DeviceId::cpu(5), DeviceId::gpu(0));
  EXPECT_LT(DeviceId::gpu(1), DeviceId::gpu(2));
}

TEST(DeviceId, RefusesEverythingElse) {
  for (const char *bad : {"", "gpu", "gpu:", ":1", "tpu:0", "GPU:0", "gpu:-1", "gpu:+1", "gpu: 1",
                          "gpu:1 ", "gpu:0x1", "gpu:1:2", "gpu:99999999999"})
    EXPECT_FALSE(DeviceId::parse(bad)) << bad;
}

TEST(DeviceId, TextForMessages) {
  EXPECT_EQ(deviceText(DeviceId::gpu(4)), "gpu:4");
  EXPECT_EQ(deviceText(std::nullopt), "");
  EXPECT_EQ(joinDevices({DeviceId::host(), DeviceId::gpu(1)}), "cpu:0, gpu:1");
  EXPECT_EQ(joinDevices({}), "");
}
