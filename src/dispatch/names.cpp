// Op, reduce and target names: one table each, used for printing and for parsing CLI flags.
#include <string>

#include "spgnn/ops.hpp"

namespace spgnn {

namespace {
constexpr const char* kSpmmOps[] = {"copy_u", "copy_e", "u_mul_e", "u_add_e", "u_sub_e", "u_div_e"};
constexpr const char* kReduces[] = {"sum", "mean", "max", "min"};
constexpr const char* kSddmmOps[] = {"dot", "add", "sub", "mul", "div", "copy_lhs", "copy_rhs"};
constexpr const char* kTargets[] = {"u", "v", "e"};

template <class Enum, size_t N>
Enum parse_name(const char* const (&names)[N], const std::string& s, const char* what) {
  std::string known;
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) return static_cast<Enum>(i);
    known += (i ? ", " : "") + std::string(names[i]);
  }
  throw InvalidArgument(std::string(what) + " '" + s + "' is unknown; expected one of: " + known);
}
}  // namespace

const char* name(SpmmOp op) { return kSpmmOps[static_cast<int>(op)]; }
const char* name(Reduce r) { return kReduces[static_cast<int>(r)]; }
const char* name(SddmmOp op) { return kSddmmOps[static_cast<int>(op)]; }
const char* name(Target t) { return kTargets[static_cast<int>(t)]; }
SpmmOp parse_spmm_op(const std::string& s) { return parse_name<SpmmOp>(kSpmmOps, s, "spmm op"); }
Reduce parse_reduce(const std::string& s) { return parse_name<Reduce>(kReduces, s, "reduce"); }
SddmmOp parse_sddmm_op(const std::string& s) { return parse_name<SddmmOp>(kSddmmOps, s, "sddmm op"); }
Target parse_target(const std::string& s) { return parse_name<Target>(kTargets, s, "target"); }

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::spmm: return "spmm";
    case OpKind::sddmm: return "sddmm";
    case OpKind::cbsr_spgemm: return "cbsr_spgemm";
    case OpKind::cbsr_sspmm: return "cbsr_sspmm";
  }
  return "?";
}

OpKind parse_op_kind(const std::string& s) {
  for (OpKind k : {OpKind::spmm, OpKind::sddmm, OpKind::cbsr_spgemm, OpKind::cbsr_sspmm})
    if (s == op_kind_name(k)) return k;
  throw InvalidArgument("unknown op '" + s + "'; expected spmm, sddmm, cbsr_spgemm or cbsr_sspmm");
}

}  // namespace spgnn
