// Errors thrown by every public entry point. Messages name the argument, file or line at fault
// and say what was expected, so a user can fix the input without reading spgnn's source.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace spgnn {

// Base of all spgnn errors.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A caller passed an argument that is out of range or inconsistent (shapes, devices, flags).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
// A file could not be read or is malformed. `what()` carries "path:line: message".
class FormatError : public Error {
 public:
  using Error::Error;
};
// The GPU runtime or a vendor library failed; `what()` carries the call, file and line.
class DeviceError : public Error {
 public:
  using Error::Error;
};
// Asked for a device, strategy or feature this build does not have.
class Unsupported : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace spgnn

// Throws `Type` with the streamed message when `cond` does not hold.
#define SPGNN_CHECK(cond, Type, ...)                                    \
  do {                                                                  \
    if (!(cond)) throw Type(::spgnn::detail::concat(__VA_ARGS__));      \
  } while (0)
