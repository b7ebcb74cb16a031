// Arrays in and out of the extension through DLPack (nanobind's ndarray): a PyTorch, NumPy or
// CuPy array becomes a spgnn::Tensor that views the caller's memory (no copy), and spgnn memory
// leaves as an array whose owner keeps it alive. Nothing here links against a framework.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>
#include <string>

#include "spgnn/tensor.hpp"

namespace spgnn::py {

namespace nb = nanobind;
using Array = nb::ndarray<>;

// A zero-copy view of `a` (`what` names the argument in errors: dtype, device, layout). The view
// holds a reference to the array until the last copy of the Tensor is gone.
Tensor view(const Array& a, const std::string& what);
// The same for optional arguments: None gives an undefined Tensor.
Tensor view(const std::optional<Array>& a, const std::string& what);
// An array over `t`'s memory, sharing ownership with `t` (no copy): a framework-free DLPack
// array, or with `as_torch` a torch.Tensor (torch imported at run time, never linked).
nb::object to_array(const Tensor& t, bool as_torch = false);

}  // namespace spgnn::py
