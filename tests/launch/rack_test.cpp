// The rack TOML (launch/rack.hpp): good racks, each bad key or value with
// its message (file, line, key); the plan's placement and ports; the
// cluster config made from it parsed back by the real parser; the Slurm
// batch script.

#include <gtest/gtest.h>

#include <string>

#include "cluster/cluster_config.hpp"
#include "common/error.hpp"
#include "launch/plan.hpp"
#include "launch/rack.hpp"
#include "launch/slurm_launcher.hpp"

namespace {

using tessera::error_text;
using tessera::launch::make_plan;
using tessera::launch::parse_rack;

const std::string head = "[rack]\nname = \"lab\"\ncluster_secret_file = \"lab.secret\"\n";

const std::string three_on_one = head + R"([[host]]
name = "local"
address = "127.0.0.1"
roles = ["frontend", "prefill", "decode"]
)";

/// The error text of parsing `text` as /r/rack.toml ("" when it parsed).
std::string problems(const std::string& text) {
  auto r = parse_rack(text, "/r/rack.toml");
  return r ? std::string{} : error_text(r.error());
}

TEST(RackTest, ReadsAThreeNodeRackWithDefaults) {
  auto r = parse_rack(three_on_one, "/r/rack.toml");
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->name, "lab");
  EXPECT_EQ(r->cluster_secret_file, "/r/lab.secret");
  EXPECT_EQ(r->state_dir, "/tmp/tessera-lab");
  EXPECT_EQ(r->binary, "tessera");
  EXPECT_EQ(r->ports_base, 14100);
  ASSERT_EQ(r->hosts.size(), 1u);
  EXPECT_EQ(r->hosts[0].ssh, "127.0.0.1");
  EXPECT_EQ(r->hosts[0].ssh_port, 22);
}

TEST(RackTest, TheShippedExamplesRead) {
  for (const char* f : {"example-4host.toml", "example-slurm-placement.toml"}) {
    auto r = tessera::launch::load_rack(std::string{TESSERA_SOURCE_DIR} + "/configs/racks/" + f);
    ASSERT_TRUE(r) << f << ": " << error_text(r.error());
    auto p = make_plan(*r);
    ASSERT_TRUE(p) << f << ": " << error_text(p.error());
    auto text = tessera::launch::cluster_config_text(*p, "/s/cluster.secret");
    ASSERT_TRUE(text) << f << ": " << error_text(text.error());
  }
}

TEST(RackTest, EveryBadKeyAndValueIsNamedWithItsLine) {
  struct bad {
    std::string text;
    std::string message;
  };
  const std::vector<bad> cases{
    {"[rack]\nname = \"x\"\nnmae = 1\n", "/r/rack.toml:3: unknown key 'rack.nmae'; did you mean 'name'?"},
    {"[rakc]\n", "unknown key 'rakc'; did you mean 'rack'?"},
    {"x = [\n", "/r/rack.toml:"},
    {"[rack]\nname = 3\n", "/r/rack.toml:2: 'rack.name' must be a string"},
    {"[rack]\nname = \"a b\"\n", "rack.name 'a b' must be 1-64 letters"},
    {"[rack]\nname = \"-x\"\n", "rack.name '-x' must be 1-64 letters"},
    {"[rack]\nmodel = \"m\"\n", "rack.name is missing"},
    {head + "ports_base = 80\n", "/r/rack.toml:4: 'rack.ports_base' must be an integer in [1024, 65000], got 80"},
    {head + "state_dir = \"relative\"\n", "rack.state_dir 'relative' must be an absolute path"},
    {head + "state_dir = \"/tmp/a;rm -rf ~\"\n", "rack.state_dir '/tmp/a;rm -rf ~' must be an absolute path"},
    {head + "state_dir = \"/tmp/../etc\"\n", "must be an absolute path without '..'"},
    {head + "binary = \"-oProxyCommand=x\"\n", "rack.binary '-oProxyCommand=x' must be a path"},
    {head + "binary = \"tessera\\nrm\"\n", "'rack.binary' holds a control character"},
    {head + "ssh_options = \"-v\"\n", "'rack.ssh_options' must be an array of strings"},
    {head + "[cluster]\nkv_cache_mb = -1\n", "'kv_cache_mb' must be an integer in [0, 1048576], got -1"},
    {head + "[cluster]\nkv_cahce_mb = 1\n", "unknown key 'cluster.kv_cahce_mb'; did you mean 'kv_cache_mb'?"},
    {head + "[cluster]\nmodel = \"m\"\n", "'cluster.model' is set by the rack ([rack].model), not [cluster]"},
    {head + "[cluster]\nrouter_policy = \"fast\"\n", "'router_policy' must be one of kv, round-robin"},
    {head + "[placement]\nprefill = 0\n", "[placement] places no node"},
    {head + "[placement]\nprefil = 1\n", "unknown key 'placement.prefil'; did you mean 'prefill'?"},
    {head + "[placement]\nprefill = 1\n", "[placement] needs [[host]] tables with gpus, or [slurm] nodes"},
    {head + "[placement]\ndecode = 9\n[[host]]\nname = \"a\"\naddress = \"h\"\ngpus = 8\n",
     "[placement] asks for 9 worker nodes (one GPU each); the rack has 8 GPUs"},
    {head + "[placement]\ndecode = 1\n[[host]]\nname = \"a\"\naddress = \"h\"\nroles = [\"frontend\"]\n",
     "[placement] and [[host]] roles both place nodes"},
    {head, "no [[host]] tables and no [placement]"},
    {head + "[host]\nname = \"a\"\n", "'host' must be an array of tables"},
    {head + "[[host]]\naddress = \"h\"\nroles = [\"frontend\"]\n", "/r/rack.toml:4: host[0].name is missing"},
    {head + "[[host]]\nname = \"a\"\nroles = [\"frontend\"]\n", "host[0].address is missing"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h:22\"\nroles = [\"frontend\"]\n",
     "/r/rack.toml:6: host[0].address 'h:22' must be a host name or an IPv4 address, without a port"},
    {head + "[[host]]\nname = \"a\"\naddress = \"::1\"\nroles = [\"frontend\"]\n", "host[0].address '::1' must be"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\nssh = \"-oProxyCommand=sh\"\nroles = [\"frontend\"]\n",
     "host[0].ssh '-oProxyCommand=sh' must be host or user@host"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\nssh = \"u@h x\"\nroles = [\"frontend\"]\n",
     "host[0].ssh 'u@h x' must be host or user@host"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\nssh_port = 0\nroles = [\"frontend\"]\n",
     "'host[0].ssh_port' must be an integer in [1, 65535], got 0"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\nroles = [\"frontend\", \"decoder\"]\n",
     "host[0].roles: unknown role 'decoder'; did you mean 'decode'?"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\nroles = []\n", "host[0].roles is empty"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\nroles = [\"prefill\"]\n",
     "exactly one host role must be frontend (it runs the router too), found 0"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\nroles = [\"frontend\"]\n[[host]]\nname = \"a\"\naddress = "
            "\"g\"\nroles = [\"frontend\"]\n",
     "host[1].name 'a' is used twice"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\ngpus = 1\nroles = [\"frontend\", \"decode\", \"decode\"]\n",
     "host[0] 'a' has 2 worker nodes but 1 GPUs (one each)"},
    {head + "[[host]]\nname = \"a\"\naddress = \"h\"\nrole = [\"frontend\"]\n",
     "unknown key 'host[0].role'; did you mean 'roles'?"},
    {head + "[slurm]\nnodes = 0\n", "'slurm.nodes' must be an integer in [1, 4096], got 0"},
  };
  for (const auto& c : cases) {
    const auto got = problems(c.text);
    EXPECT_NE(got.find(c.message), std::string::npos) << "rack:\n" << c.text << "\ngot: " << got
                                                      << "\nwanted: " << c.message;
  }
}

TEST(RackTest, EveryProblemOfAFileIsReportedAtOnce) {
  const auto got = problems("[rack]\nname = 3\nports_base = 1\n[[host]]\nname = \"a\"\n");
  EXPECT_NE(got.find(":2: 'rack.name' must be a string"), std::string::npos) << got;
  EXPECT_NE(got.find(":3: 'rack.ports_base'"), std::string::npos) << got;
  EXPECT_NE(got.find("host[0].address is missing"), std::string::npos) << got;
}

TEST(RackTest, ClusterOptionsReachTheGeneratedConfig) {
  auto r = parse_rack(three_on_one + "[cluster]\nkv_cache_mb = 64\nthreads_per_worker = 2\nengine = \"sim\"\n[cluster.sim]\n"
                                "gpu = \"h200\"\n",
                 "/r/rack.toml");
  ASSERT_TRUE(r) << error_text(r.error());
  auto p = make_plan(*r);
  ASSERT_TRUE(p) << error_text(p.error());
  auto text = tessera::launch::cluster_config_text(*p, "/s/cluster.secret");
  ASSERT_TRUE(text) << error_text(text.error());
  auto c = tessera::cluster::parse_cluster_config(*text, "generated");
  ASSERT_TRUE(c) << error_text(c.error()) << "\n" << *text;
  EXPECT_EQ(c->kv_cache_mb, 64u);
  EXPECT_EQ(c->threads_per_worker, 2);
  EXPECT_EQ(c->engine, "sim");
  EXPECT_EQ(c->sim.gpu, "h200");
  EXPECT_EQ(c->transport, "ucx");
  EXPECT_EQ(c->cluster_secret_file, "/s/cluster.secret");
}

TEST(RackTest, TheGeneratedConfigParsesWithTheClusterParser) {
  auto r = parse_rack(three_on_one, "/r/rack.toml");
  ASSERT_TRUE(r);
  r->model = "/models/a \"quoted\" path";
  auto p = make_plan(*r);
  ASSERT_TRUE(p);
  auto text = tessera::launch::cluster_config_text(*p, "");
  ASSERT_TRUE(text) << error_text(text.error());
  auto c = tessera::cluster::parse_cluster_config(*text, "generated");
  ASSERT_TRUE(c) << error_text(c.error());
  EXPECT_EQ(c->model, "/models/a \"quoted\" path");
  ASSERT_EQ(c->nodes.size(), 3u);
  EXPECT_EQ(c->nodes[0].id, "front");
  EXPECT_EQ(c->nodes[0].roles, (std::vector<std::string>{"frontend", "router"}));
  EXPECT_EQ(c->nodes[0].address, "127.0.0.1:14101");
  EXPECT_EQ(c->nodes[0].http_port, 14100);
  EXPECT_EQ(c->nodes[1].id, "prefill-0");
  EXPECT_EQ(c->nodes[1].address, "127.0.0.1:14102");
  EXPECT_EQ(c->nodes[2].id, "decode-0");
  EXPECT_EQ(c->nodes[2].roles, (std::vector<std::string>{"decode"}));
  EXPECT_TRUE(c->cluster_secret_file.empty());
}

TEST(RackTest, PlacementSpreadsWorkersByFreeGpus) {
  const std::string text = head + R"([placement]
prefill = 2
decode = 4
[[host]]
name = "a"
address = "10.0.0.1"
gpus = 2
[[host]]
name = "b"
address = "10.0.0.2"
gpus = 4
)";
  auto r = parse_rack(text, "/r/rack.toml");
  ASSERT_TRUE(r) << error_text(r.error());
  auto p = make_plan(*r);
  ASSERT_TRUE(p) << error_text(p.error());
  ASSERT_EQ(p->nodes.size(), 7u);
  EXPECT_EQ(p->nodes[0].id, "front");
  EXPECT_EQ(p->nodes[0].host, 0u);
  EXPECT_EQ(p->nodes[0].gpu, -1);
  // b has 4 free, a 2: b, b, then a and b alternate, the first host on a tie.
  std::string where;
  for (size_t i = 1; i < p->nodes.size(); ++i)
    where += p->nodes[i].id + "@" + p->hosts[p->nodes[i].host].name + ":" + std::to_string(p->nodes[i].gpu) + " ";
  EXPECT_EQ(where, "prefill-0@b:0 prefill-1@b:1 decode-0@a:0 decode-1@b:2 decode-2@a:1 decode-3@b:3 ");
}

TEST(RackTest, PortsPastTheEndAreRefused) {
  auto r = parse_rack(three_on_one, "/r/rack.toml");
  ASSERT_TRUE(r);
  r->ports_base = 65534;
  auto p = make_plan(*r);
  ASSERT_FALSE(p);
  EXPECT_NE(error_text(p.error()).find("runs past port 65535"), std::string::npos);
}

TEST(RackTest, SlurmPlacementTakesTheAllocationsHosts) {
  auto r = parse_rack(head + "[placement]\nprefill = 1\ndecode = 1\n[slurm]\nnodes = 1\ngpus_per_node = 2\n",
                      "/r/rack.toml");
  ASSERT_TRUE(r) << error_text(r.error());
  auto p = make_plan(*r);
  ASSERT_TRUE(p) << error_text(p.error());
  EXPECT_TRUE(p->hosts_from_allocation);
  ASSERT_EQ(p->hosts.size(), 1u);
  const auto s = tessera::launch::sbatch_script(*p, "/opt/tessera");
  EXPECT_NE(s.find("#SBATCH --nodes=1\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("--nodelist"), std::string::npos) << s;
  EXPECT_NE(s.find("hosts=($(scontrol show hostnames \"$SLURM_JOB_NODELIST\"))"), std::string::npos) << s;
  EXPECT_NE(s.find("-e \"s/\\\"slurm-host-0:/\\\"${hosts[0]}:/\""), std::string::npos) << s;
  EXPECT_NE(s.find("srun --overlap --nodes=1 --ntasks=1 -J decode-0 -w \"${hosts[0]}\" --export=ALL,CUDA_VISIBLE_DEVICES=1 "
                   "/opt/tessera node --config \"$job/cluster.toml\" --node decode-0 > \"$job/decode-0.log\" 2>&1 &"),
            std::string::npos)
    << s;
  EXPECT_NE(s.find("\nwait\n"), std::string::npos);
}

} // namespace
