// Where GPU ranks run: the --gpus / visible devices / tp choice, the CUDA_VISIBLE_DEVICES a
// spawned worker gets and the ordinal it then uses, and the --device flag. Expected values
// are worked out by hand from the rules in the headers.
#include "controller/workers/gpu_plan.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/process/cuda_ordinal.h"

namespace tessera::workers {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string ErrorOf(const absl::StatusOr<std::vector<int>>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(PickGpusTest, DefaultsToTheFirstTpVisibleDevices) {
  EXPECT_THAT(*PickGpus({}, 4, 2), ElementsAre(0, 1));
  EXPECT_THAT(*PickGpus({}, 1, 1), ElementsAre(0));
  EXPECT_THAT(*PickGpus({}, 8, 8), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST(PickGpusTest, TooFewVisibleDevicesNamesTpAndTheCount) {
  std::string e = ErrorOf(PickGpus({}, 2, 4));
  EXPECT_THAT(e, HasSubstr("tp is 4 but only 2 GPU(s) are visible"));
  EXPECT_THAT(e, HasSubstr("--cpu-workers 4"));
}

TEST(PickGpusTest, UsesTheFirstTpOfTheRequestedInTheirOrder) {
  EXPECT_THAT(*PickGpus({"3", "1"}, 4, 2), ElementsAre(3, 1));
  EXPECT_THAT(*PickGpus({"2", "0", "1"}, 3, 1), ElementsAre(2));
}

TEST(PickGpusTest, RejectsBadRequests) {
  EXPECT_THAT(ErrorOf(PickGpus({"0", "2"}, 2, 2)),
              HasSubstr("gpus: device 2 does not exist (2 GPUs are visible: 0-1)"));
  EXPECT_THAT(ErrorOf(PickGpus({"1"}, 1, 1)),
              HasSubstr("gpus: device 1 does not exist (1 GPU is visible: 0)"));
  EXPECT_THAT(ErrorOf(PickGpus({"1", "1"}, 4, 2)), HasSubstr("gpus: device 1 is listed twice"));
  EXPECT_THAT(ErrorOf(PickGpus({"GPU-5e1c0c2a"}, 4, 1)),
              HasSubstr("gpus: 'GPU-5e1c0c2a' is not a CUDA device number"));
  EXPECT_THAT(ErrorOf(PickGpus({"-1"}, 4, 1)), HasSubstr("'-1' is not a CUDA device number"));
  EXPECT_THAT(ErrorOf(PickGpus({"0"}, 4, 2)), HasSubstr("gpus lists 1 device(s) but tp is 2"));
}

PlacementInputs CudaBuild(int tp, int n_visible) {
  PlacementInputs in;
  in.tp = tp;
  in.build_has_cuda = true;
  in.build_has_nccl = true;
  in.n_visible = n_visible;
  return in;
}

TEST(PlaceRanksTest, GpuWorkersWithNcclWhenACudaBuildSeesGpus) {
  absl::StatusOr<Placement> p = PlaceRanks(CudaBuild(2, 4));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->gpus, ElementsAre(0, 1));
  EXPECT_EQ(p->comm_backend, "nccl");
  EXPECT_THAT(p->warnings, IsEmpty());

  p = PlaceRanks(CudaBuild(1, 4));
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->gpus, ElementsAre(0));
  EXPECT_EQ(p->comm_backend, "gloo");  // one rank: no collectives
}

TEST(PlaceRanksTest, GlooWithAWarningWithoutNccl) {
  PlacementInputs in = CudaBuild(2, 2);
  in.build_has_nccl = false;
  absl::StatusOr<Placement> p = PlaceRanks(in);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->gpus, ElementsAre(0, 1));
  EXPECT_EQ(p->comm_backend, "gloo");
  EXPECT_THAT(p->warnings, ElementsAre(HasSubstr("this build has no NCCL")));
}

TEST(PlaceRanksTest, CpuWorkersFlagWinsOverVisibleGpus) {
  PlacementInputs in = CudaBuild(2, 8);
  in.cpu_workers = true;
  absl::StatusOr<Placement> p = PlaceRanks(in);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->gpus, IsEmpty());
  EXPECT_EQ(p->comm_backend, "gloo");
  EXPECT_THAT(p->warnings, IsEmpty());
}

TEST(PlaceRanksTest, CpuWorkersWithoutAGpuAsBefore) {
  // A CUDA build on a machine without a GPU, and a build without CUDA: CPU workers, a
  // warning only when --gpus asked for GPUs.
  for (bool cuda : {true, false}) {
    PlacementInputs in = CudaBuild(2, 0);
    in.build_has_cuda = cuda;
    absl::StatusOr<Placement> p = PlaceRanks(in);
    ASSERT_TRUE(p.ok());
    EXPECT_THAT(p->gpus, IsEmpty());
    EXPECT_EQ(p->comm_backend, "gloo");
    EXPECT_THAT(p->warnings, IsEmpty());
    in.gpus = {"0", "1"};
    p = PlaceRanks(in);
    ASSERT_TRUE(p.ok());
    EXPECT_THAT(p->gpus, IsEmpty());
    EXPECT_THAT(p->warnings,
                ElementsAre(HasSubstr(cuda ? "--gpus is set but no CUDA device is visible"
                                           : "--gpus is set but this build has no CUDA backend")));
  }
  // A build without CUDA ignores visible devices (it cannot use them).
  PlacementInputs in = CudaBuild(1, 4);
  in.build_has_cuda = false;
  EXPECT_THAT(PlaceRanks(in)->gpus, IsEmpty());
}

TEST(PlaceRanksTest, ValidatesGpusAgainstTheVisibleDevices) {
  PlacementInputs in = CudaBuild(2, 2);
  in.gpus = {"1", "2"};
  absl::StatusOr<Placement> p = PlaceRanks(in);
  EXPECT_THAT(p.status().message(), HasSubstr("gpus: device 2 does not exist"));
  in.gpus = {"1", "0"};
  EXPECT_THAT(PlaceRanks(in)->gpus, ElementsAre(1, 0));
  EXPECT_THAT(PlaceRanks(CudaBuild(4, 2)).status().message(),
              HasSubstr("tp is 4 but only 2 GPU(s) are visible"));
}

TEST(PlaceRanksTest, ExternalWorkersUseGpusOnlyWhenNamed) {
  PlacementInputs in = CudaBuild(2, 0);  // the controller's host need not have GPUs
  in.external_workers = true;
  EXPECT_THAT(PlaceRanks(in)->gpus, IsEmpty());
  in.gpus = {"0", "0"};
  EXPECT_THAT(PlaceRanks(in).status().message(), HasSubstr("listed twice"));
  in.gpus = {"5", "7"};
  absl::StatusOr<Placement> p = PlaceRanks(in);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->gpus, ElementsAre(5, 7));
  EXPECT_EQ(p->comm_backend, "nccl");
}

TEST(ConsecutiveGpusTest, CountsUpFromTheFirst) {
  EXPECT_THAT(ConsecutiveGpus(0, 2), ElementsAre(0, 1));
  EXPECT_THAT(ConsecutiveGpus(2, 3), ElementsAre(2, 3, 4));
}

TEST(ChildCudaVisibleDevicesTest, MapsThroughTheParentsList) {
  EXPECT_EQ(ChildCudaVisibleDevices(nullptr, 1), "1");
  EXPECT_EQ(ChildCudaVisibleDevices("", 3), "3");
  // tesserad started with CUDA_VISIBLE_DEVICES=4,6 sees them as 0 and 1.
  EXPECT_EQ(ChildCudaVisibleDevices("4,6", 0), "4");
  EXPECT_EQ(ChildCudaVisibleDevices("4,6", 1), "6");
  EXPECT_EQ(ChildCudaVisibleDevices("GPU-aaaa, GPU-bbbb", 1), "GPU-bbbb");
  EXPECT_EQ(ChildCudaVisibleDevices("4,6", 2), "2");  // beyond the list: left to CUDA
}

TEST(CudaOrdinalTest, OneVisibleDeviceIsOrdinalZero) {
  EXPECT_EQ(worker::CudaOrdinal("3", 3), 0);
  EXPECT_EQ(worker::CudaOrdinal("GPU-5e1c0c2a", 5), 0);
  EXPECT_EQ(worker::CudaOrdinal(nullptr, 3), 3);  // started by hand, all devices visible
  EXPECT_EQ(worker::CudaOrdinal("", 2), 2);
  EXPECT_EQ(worker::CudaOrdinal("0,1,2,3", 2), 2);
}

TEST(ParseDeviceFlagTest, CpuCudaAndCudaN) {
  EXPECT_EQ(*ParseDeviceFlag("cpu"), -1);
  EXPECT_EQ(*ParseDeviceFlag("cuda"), 0);
  EXPECT_EQ(*ParseDeviceFlag("cuda:0"), 0);
  EXPECT_EQ(*ParseDeviceFlag("cuda:3"), 3);
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA", "cuda:1,2", ""}) {
    absl::StatusOr<int> r = ParseDeviceFlag(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("is not cpu, cuda or cuda:N")) << bad;
  }
}

}  // namespace
}  // namespace tessera::workers
