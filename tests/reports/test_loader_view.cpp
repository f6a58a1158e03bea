// The input-pipeline section (reports/loader_view.h) names the dataset each loader run
// measured: issue 43's suite measured its own JPEGs while the user had given a folder, and the
// report did not say which.
#include "reports/loader_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ddpb::reports {
namespace {

SuiteRun loader_run(const std::string& id, const std::string& data, int64_t images,
                    int64_t workers) {
  SuiteRun r;
  r.id = id;
  r.group = RunGroup::Loader;
  r.workload = "resnet-tiny";
  r.status = RunStatus::Ok;
  RunMetrics m;
  m.samples_per_s = 100;
  LoaderSummary l;
  l.source = "imagefolder";
  l.data = data;
  l.files = {{data + "/ant", std::nullopt, images / 2, images / 2},
             {data + "/cat", std::nullopt, images - images / 2, images - images / 2}};
  l.workers = workers;
  l.pin_memory = "not applicable (cpu:0 device)";
  l.samples_per_s = 50;
  m.loader = l;
  r.metrics = m;
  return r;
}

bool has_note(const ReportSection& s, const std::string& text) {
  return std::any_of(s.notes.begin(), s.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

TEST(LoaderView, EveryRowAndANotePerWorkloadNameTheDatasetMeasured) {
  SuiteRecord suite;
  suite.runs = {loader_run("resnet-tiny/single/w1/loader-w0", "/home/u/imgs", 240, 0),
                loader_run("resnet-tiny/single/w1/loader-w2", "/home/u/imgs", 240, 2)};
  const ReportSection s = build_loader_section(suite);
  ASSERT_EQ(s.tables.size(), 1u);
  const TextTable& t = s.tables[0].table;
  ASSERT_EQ(t.header[1], "data");
  ASSERT_EQ(t.rows.size(), 2u);
  for (const auto& row : t.rows) EXPECT_EQ(row[1], "/home/u/imgs");
  EXPECT_TRUE(has_note(s, "resnet-tiny measured on /home/u/imgs (240 images in 2 class folders)."));
  // The negative control: the suite's own JPEGs are named as such, not as the user's.
  suite.runs = {loader_run("resnet-tiny/single/w1/loader-w0", "data/imagefolder", 160, 0)};
  const ReportSection own = build_loader_section(suite);
  EXPECT_FALSE(has_note(own, "/home/u/imgs"));
  EXPECT_TRUE(has_note(own, "resnet-tiny measured on data/imagefolder (160 images"));
  EXPECT_TRUE(has_note(own, "data/imagefolder holds the JPEGs the suite makes"));
}

TEST(LoaderView, TheDatasetNameSaysTokensSplitsAndSyntheticData) {
  LoaderSummary l;
  l.source = "synthetic";
  EXPECT_EQ(dataset_name(l), "synthetic data");
  l.source = "tokens";
  l.data = "/d/shakespeare_char";
  EXPECT_EQ(dataset_name(l), "/d/shakespeare_char") << "a record from before the files list";
  l.files = {{"/d/shakespeare_char/train.bin", 1003854, std::nullopt, 15685}};
  l.split = "train";
  EXPECT_EQ(dataset_name(l), "/d/shakespeare_char (1003854 tokens in 1 shard, split train)");
}

}  // namespace
}  // namespace ddpb::reports
