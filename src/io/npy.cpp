// NumPy .npy arrays (format versions 1.0, 2.0, 3.0; spec: numpy/lib/format.py).
// The header is a Python dict literal; it is parsed as a tiny Python-literal grammar (strings,
// True/False/None, integers, tuples/lists) rather than with string searches, so key order,
// spacing, trailing commas and Python 2 "3L" integers all work. Plain files are read straight
// into the tensor's storage (no intermediate copy); gzip/zstd files go through memory.
#include <algorithm>
#include <cstring>

#include "io/io_internal.hpp"
#include "spgnn/io.hpp"

namespace spgnn {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// numpy itself refuses headers above 10000 bytes by default; anything much larger is corrupt.
constexpr uint32_t kMaxHeaderBytes = 1u << 20;
// A real header nests a tuple in a dict; the literal parser recurses per level, so a corrupt
// header of a million '(' must stop long before the stack does.
constexpr int kMaxNesting = 16;
// Headers are quoted in messages up to this many characters.
constexpr size_t kMaxQuoted = 200;

// The header text for a message: padding dropped, shortened, control bytes escaped.
std::string quote_header(const std::string& header) {
  size_t n = header.size();
  while (n > 0 && (header[n - 1] == ' ' || header[n - 1] == '\n')) --n;
  std::string s = "'";
  for (size_t i = 0; i < n && i < kMaxQuoted; ++i) {
    const unsigned char c = static_cast<unsigned char>(header[i]);
    if (c >= 32 && c < 127) {
      s.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      s += buf;
    }
  }
  s += "'";
  if (n > kMaxQuoted) {
    s += " (first " + std::to_string(kMaxQuoted) + " of " + std::to_string(n) + " bytes)";
  }
  return s;
}

struct PyValue {
  enum Kind { string, boolean, none, integer, sequence } kind = none;
  std::string str;
  bool b = false;
  int64_t i = 0;
  std::vector<PyValue> items;
};

class LiteralParser {
 public:
  LiteralParser(const std::string& s, const std::string& path) : s_(s), path_(path) {}

  std::vector<std::pair<std::string, PyValue>> parse_dict() {
    std::vector<std::pair<std::string, PyValue>> out;
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      PyValue key = parse_value(1);
      if (key.kind != PyValue::string) fail("dictionary key is not a string");
      expect(':');
      out.emplace_back(key.str, parse_value(1));
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect('}');
      break;
    }
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the header dictionary");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    io::throw_format(path_, 0, "malformed .npy header (" + what + " at offset " +
                                   std::to_string(i_) + "): " + quote_header(s_));
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  PyValue parse_value(int depth = 0) {
    if (depth > kMaxNesting) {
      fail("nested more than " + std::to_string(kMaxNesting) + " levels deep");
    }
    skip_ws();
    PyValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      ++i_;
      const size_t end = s_.find(c, i_);
      if (end == std::string::npos) fail("unterminated string");
      v.kind = PyValue::string;
      v.str = s_.substr(i_, end - i_);
      i_ = end + 1;
    } else if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      ++i_;
      v.kind = PyValue::sequence;
      for (;;) {
        skip_ws();
        if (peek() == close) {
          ++i_;
          break;
        }
        v.items.push_back(parse_value(depth + 1));
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        if (peek() != close) fail(std::string("expected ',' or '") + close + "'");
      }
    } else if (s_.compare(i_, 4, "True") == 0) {
      v.kind = PyValue::boolean;
      v.b = true;
      i_ += 4;
    } else if (s_.compare(i_, 5, "False") == 0) {
      v.kind = PyValue::boolean;
      i_ += 5;
    } else if (s_.compare(i_, 4, "None") == 0) {
      i_ += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      bool overflow = false;
      const char* b = s_.data() + i_;
      const char* r = io::parse_int(b, s_.data() + s_.size(), v.i, overflow);
      if (!r) fail(overflow ? "integer does not fit in 64 bits" : "bad integer");
      v.kind = PyValue::integer;
      i_ += static_cast<size_t>(r - b);
      if (peek() == 'L') ++i_;
    } else {
      fail("unexpected character");
    }
    return v;
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
};

// Maps a descr such as '<f4' to a DType; refuses everything else by name.
DType parse_descr(const std::string& descr, const std::string& path) {
  if (descr.empty()) io::throw_format(path, 0, "empty dtype descr in the .npy header");
  char order = '=';
  std::string code = descr;
  if (std::strchr("<>|=", descr[0])) {
    order = descr[0];
    code = descr.substr(1);
  }
  struct Known {
    const char* code;
    const char* name;
    bool supported;
    DType dtype;
  };
  static const Known kKnown[] = {
      {"f4", "float32", true, DType::f32},   {"f8", "float64", true, DType::f64},
      {"i4", "int32", true, DType::i32},     {"i8", "int64", true, DType::i64},
      {"u1", "uint8", true, DType::u8},      {"u2", "uint16", true, DType::u16},
      {"b1", "bool", false, DType::u8},      {"i1", "int8", false, DType::u8},
      {"i2", "int16", false, DType::u8},     {"u4", "uint32", false, DType::u8},
      {"u8", "uint64", false, DType::u8},    {"f2", "float16", true, DType::f16},
      {"f16", "float128", false, DType::u8}, {"c8", "complex64", false, DType::u8},
      {"c16", "complex128", false, DType::u8}, {"O", "object", false, DType::u8},
  };
  const char* kSupported = "supported: float32 '<f4', float64 '<f8', int32 '<i4', int64 '<i8', "
                           "uint8 '|u1', uint16 '<u2', float16 '<f2'";
  for (const Known& k : kKnown) {
    if (code != k.code) continue;
    if (!k.supported) {
      io::throw_format(path, 0, std::string("unsupported dtype ") + k.name + " ('" + descr +
                                    "'); " + kSupported);
    }
    const size_t size = dtype_size(k.dtype);
    if (size > 1 && order == '>') {
      io::throw_format(path, 0, std::string("unsupported big-endian dtype '") + descr +
                                    "'; save little-endian data (arr.astype('<" + code + "'))");
    }
    if (size > 1 && order == '|') {
      io::throw_format(path, 0, "invalid dtype '" + descr + "': byte order '|' is only valid for "
                                "single-byte types");
    }
    return k.dtype;
  }
  io::throw_format(path, 0, "unsupported dtype '" + descr + "'; " + kSupported);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

const char* descr_of(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::u8: return "|u1";
    case DType::u16: return "<u2";
    case DType::f16: return "<f2";
    case DType::bf16: break;  // NumPy has no bfloat16
  }
  return "?";
}

}  // namespace

namespace io {

NpyInfo read_npy_info(const InputFile& f, const std::string& path) {
  if (f.size() < 10) {
    throw_format(path, 0, "truncated: " + std::to_string(f.size()) +
                              " bytes, a .npy file needs at least a 10-byte preamble");
  }
  unsigned char pre[12] = {};
  f.read_at(0, pre, std::min<uint64_t>(12, f.size()));
  if (std::memcmp(pre, kMagic, kMagicLen) != 0) {
    throw_format(path, 0, "not a NumPy .npy file: expected magic \\x93NUMPY at the start");
  }
  const int major = pre[6], minor = pre[7];
  // numpy defines only x.0 and refuses any other minor version; so does spgnn.
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw_format(path, 0, "unsupported .npy format version " + std::to_string(major) + "." +
                              std::to_string(minor) + " (expected 1.0, 2.0 or 3.0)");
  }
  uint64_t header_start = 10;
  uint32_t header_len = static_cast<uint32_t>(pre[8] | (pre[9] << 8));
  if (major != 1) {
    if (f.size() < 12) throw_format(path, 0, "truncated .npy preamble");
    header_start = 12;
    header_len = static_cast<uint32_t>(pre[8]) | (static_cast<uint32_t>(pre[9]) << 8) |
                 (static_cast<uint32_t>(pre[10]) << 16) | (static_cast<uint32_t>(pre[11]) << 24);
  }
  if (header_len > kMaxHeaderBytes) {
    throw_format(path, 0, "implausible .npy header length " + std::to_string(header_len));
  }
  if (header_start + header_len > f.size()) {
    throw_format(path, 0, "truncated: header declares " + std::to_string(header_len) +
                              " bytes but the file has " + std::to_string(f.size()));
  }
  std::string header(header_len, '\0');
  f.read_at(header_start, header.data(), header_len);

  const auto dict = LiteralParser(header, path).parse_dict();
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& [k, v] : dict) {
    if (k == "descr") descr = &v;
    else if (k == "fortran_order") fortran = &v;
    else if (k == "shape") shape = &v;
  }
  if (!descr || !fortran || !shape) {
    throw_format(path, 0, "the .npy header must have 'descr', 'fortran_order' and 'shape': " +
                              quote_header(header));
  }
  if (descr->kind == PyValue::sequence) {
    throw_format(path, 0, "unsupported structured dtype (record array); save plain arrays");
  }
  if (descr->kind != PyValue::string) throw_format(path, 0, "'descr' is not a string");
  if (fortran->kind != PyValue::boolean) throw_format(path, 0, "'fortran_order' is not True/False");
  if (shape->kind != PyValue::sequence) throw_format(path, 0, "'shape' is not a tuple");

  NpyInfo info;
  info.dtype = parse_descr(descr->str, path);
  const int64_t item = static_cast<int64_t>(dtype_size(info.dtype));
  int64_t numel = 1;
  int nontrivial = 0;
  for (const PyValue& d : shape->items) {
    if (d.kind != PyValue::integer || d.i < 0) {
      throw_format(path, 0, "'shape' must hold non-negative integers: " + quote_header(header));
    }
    int64_t bytes = 0;
    if (__builtin_mul_overflow(numel, d.i, &numel) || __builtin_mul_overflow(numel, item, &bytes)) {
      throw_format(path, 0, "shape in " + quote_header(header) + " overflows 64-bit sizes");
    }
    info.shape.push_back(d.i);
    nontrivial += d.i > 1;
  }
  // Fortran and C order coincide when at most one dimension exceeds 1.
  if (fortran->b && nontrivial > 1) {
    throw_format(path, 0, "Fortran order not supported, save with np.ascontiguousarray");
  }
  info.numel = numel;
  info.data_offset = header_start + header_len;
  return info;
}

void check_npy_data_size(const InputFile& f, const NpyInfo& info, const std::string& path) {
  // numel * itemsize cannot overflow: read_npy_info checked it.
  const uint64_t need = static_cast<uint64_t>(info.numel) * dtype_size(info.dtype);
  const uint64_t have = f.size() - info.data_offset;
  const std::string what = "shape " + shape_text(info.shape) + " of " + dtype_name(info.dtype) +
                           " needs " + std::to_string(need) + " data bytes";
  if (have < need) {
    throw_format(path, 0, "truncated: " + what + ", but only " + std::to_string(have) +
                              " follow the header");
  }
  if (have > need) {
    throw_format(path, 0, "trailing bytes: " + what + ", but " + std::to_string(have) +
                              " follow the header; the header's shape, dtype or length is wrong, "
                              "or the file holds more than one array (one np.save per file)");
  }
}

}  // namespace io

Tensor read_npy(const std::string& path) {
  const io::InputFile f(path);
  const io::NpyInfo info = io::read_npy_info(f, path);
  io::check_npy_data_size(f, info, path);
  const uint64_t need = static_cast<uint64_t>(info.numel) * dtype_size(info.dtype);
  io::check_fits_in_memory(path, 0, need, "array of shape " + shape_text(info.shape));
  Tensor t = Tensor::empty(info.shape, info.dtype);
  f.read_at(info.data_offset, t.raw(), static_cast<size_t>(need));
  return t;
}

void write_npy(const Tensor& tensor, const std::string& path) {
  SPGNN_CHECK(tensor.defined(), InvalidArgument, "write_npy('", path, "'): tensor is undefined");
  SPGNN_CHECK(tensor.dtype() != DType::bf16, Unsupported, "write_npy('", path,
              "'): .npy has no bfloat16 type; convert the tensor to float32 first");
  const Tensor t = tensor.device().is_cuda() ? tensor.to(Device::cpu()) : tensor;
  std::string dict = std::string("{'descr': '") + descr_of(t.dtype()) +
                     "', 'fortran_order': False, 'shape': " + shape_text(t.shape()) + ", }";
  // The data starts 64-byte aligned (numpy's ARRAY_ALIGN); the header ends with '\n'.
  size_t prefix = 10;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  int major = 1;
  if (total - prefix > 65535) {
    major = 2;
    prefix = 12;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  const size_t header_len = total - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string pre(kMagic, kMagicLen);
  pre.push_back(static_cast<char>(major));
  pre.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i) pre.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  io::AtomicWriter w(path);
  w.write(pre);
  w.write(dict);
  w.write(t.raw(), t.nbytes());
  w.commit();
}

}  // namespace spgnn
