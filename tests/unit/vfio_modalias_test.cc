// modalias parsing and modules.alias matching, BDF validation, Go bool parsing for BIND_NVSWITCHES.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vfio/command.h"
#include "vfio/modalias.h"
#include "vfio/pci.h"

namespace dm::vfio {
namespace {

constexpr std::string_view kH100 = "pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00";

Modalias device(std::string_view s = kH100) {
  auto m = parse_modalias(s);
  EXPECT_TRUE(m.has_value()) << s;
  return m.value_or(Modalias{});
}

TEST(Modalias, ParsesTheSevenFields) {
  const Modalias m = device();
  EXPECT_THAT(m.fields,
              ::testing::ElementsAre("000010DE", "00002330", "000010DE", "000016C1", "03", "02", "00"));
  EXPECT_THAT(parse_modalias("v*d00002342sv*sd*bc*sc*i*")->fields,
              ::testing::ElementsAre("*", "00002342", "*", "*", "*", "*", "*"));
}

TEST(Modalias, RejectsMalformedText) {
  EXPECT_FALSE(parse_modalias("").has_value());
  EXPECT_FALSE(parse_modalias("usb:v1234p5678").has_value());
  EXPECT_FALSE(parse_modalias("pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02").has_value());
  EXPECT_FALSE(parse_modalias("pci:v000010DEd0000ZZ30sv000010DEsd000016C1bc03sc02i00").has_value());
}

TEST(Modalias, AliasFileKeepsOnlyVfioPciLinesInOrder) {
  const auto aliases = parse_vfio_aliases(
      "# Aliases extracted from modules themselves.\n"
      "alias pci:v000010DEd*sv*sd*bc03sc*i* nvidia\n"
      "alias vfio_pci:v000010DEd00002342sv*sd*bc*sc*i* nvgrace_gpu_vfio_pci\n"
      "alias usb:v1234p* something\n"
      "alias vfio_pci:v000015B3d0000101Esv*sd*bc*sc*i* mlx5_vfio_pci\n"
      "alias vfio_pci:broken module_x\n");
  ASSERT_EQ(aliases.size(), 2U);
  EXPECT_EQ(aliases[0].module, "nvgrace_gpu_vfio_pci");
  EXPECT_EQ(aliases[1].module, "mlx5_vfio_pci");
}

TEST(Modalias, ExactMatch) {
  const auto aliases =
      parse_vfio_aliases("alias vfio_pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00 exact_vfio\n");
  EXPECT_EQ(match_vfio_module(device(), aliases), "exact_vfio");
}

TEST(Modalias, WildcardMatchAndNonMatch) {
  const auto aliases = parse_vfio_aliases(
      "alias vfio_pci:v000010DEd00002342sv*sd*bc*sc*i* nvgrace_gpu_vfio_pci\n"
      "alias vfio_pci:v000010DEd*sv*sd*bc03sc02i* nvidia_3d_vfio\n");
  EXPECT_EQ(match_vfio_module(device(), aliases), "nvidia_3d_vfio");
  // Both match a 3D 0x2342; the one with 4 wildcards beats the one with 5.
  EXPECT_EQ(match_vfio_module(device("pci:v000010DEd00002342sv000010DEsd000016EBbc03sc02i00"), aliases),
            "nvidia_3d_vfio");
  EXPECT_EQ(match_vfio_module(device("pci:v000010DEd00002342sv000010DEsd000016EBbc03sc00i00"), aliases),
            "nvgrace_gpu_vfio_pci");
  EXPECT_EQ(match_vfio_module(device("pci:v00008086d00002342sv000010DEsd000016EBbc03sc02i00"), aliases),
            "vfio-pci");
}

TEST(Modalias, FewestWildcardsWinsWhateverTheFileOrder) {
  const std::string general = "alias vfio_pci:v000010DEd*sv*sd*bc*sc*i* general_vfio\n";
  const std::string specific = "alias vfio_pci:v000010DEd00002330sv*sd*bc03sc*i* specific_vfio\n";
  EXPECT_EQ(match_vfio_module(device(), parse_vfio_aliases(general + specific)), "specific_vfio");
  EXPECT_EQ(match_vfio_module(device(), parse_vfio_aliases(specific + general)), "specific_vfio");
}

TEST(Modalias, TieGoesToTheFirstInTheFile) {
  const std::string a = "alias vfio_pci:v000010DEd00002330sv*sd*bc*sc*i* first_vfio\n";
  const std::string b = "alias vfio_pci:v*d00002330sv000010DEsd*bc*sc*i* second_vfio\n";
  EXPECT_EQ(match_vfio_module(device(), parse_vfio_aliases(a + b)), "first_vfio");
  EXPECT_EQ(match_vfio_module(device(), parse_vfio_aliases(b + a)), "second_vfio");
}

TEST(Modalias, PartialWildcardsCompareLiterally) {
  const auto aliases = parse_vfio_aliases("alias vfio_pci:v000010DEd000023*sv*sd*bc*sc*i* partial_vfio\n");
  EXPECT_EQ(match_vfio_module(device(), aliases), "vfio-pci");
}

TEST(Modalias, NoAliasesMeansVfioPci) {
  EXPECT_EQ(match_vfio_module(device(), {}), "vfio-pci");
}

TEST(Bdf, Validation) {
  EXPECT_TRUE(valid_bdf("0000:3b:00.0"));
  EXPECT_TRUE(valid_bdf("0001:AF:1f.7"));
  EXPECT_FALSE(valid_bdf("3b:00.0"));
  EXPECT_FALSE(valid_bdf("0000:3b:00.8"));
  EXPECT_FALSE(valid_bdf("0000:3b:00"));
  EXPECT_FALSE(valid_bdf("0000-3b-00.0"));
  EXPECT_FALSE(valid_bdf("0000:3g:00.0"));
  EXPECT_FALSE(valid_bdf("0000:3b:00.0 "));
  EXPECT_FALSE(valid_bdf(""));
}

}  // namespace
}  // namespace dm::vfio
