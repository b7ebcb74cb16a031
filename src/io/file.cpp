// Raw file access for every reader and writer: whole-file reads with transparent gzip/zstd
// decompression (chosen by magic number, never by file name), random-access InputFile for the
// binary formats, and the temp-file-plus-rename writer.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <random>

#include "io/io_internal.hpp"
#include "spgnn/io.hpp"

namespace spgnn {
namespace io {

void throw_format(const std::string& path, int64_t line, const std::string& msg) {
  if (line > 0) throw FormatError(path + ":" + std::to_string(line) + ": " + msg);
  throw FormatError(path + ": " + msg);
}

namespace {
// A container's memory limit (cgroup v2, then v1), or UINT64_MAX when there is none.
uint64_t cgroup_memory_limit() {
  for (const char* f : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int fd = ::open(f, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[64] = {};
    const ssize_t r = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    uint64_t v = 0;
    const auto res = std::from_chars(buf, buf + std::max<ssize_t>(r, 0), v);
    if (res.ec == std::errc() && v > 0) return v;  // "max" (no limit) does not parse
  }
  return UINT64_MAX;
}
}  // namespace

uint64_t physical_memory_bytes() {
  static const uint64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    // Unknown: do not refuse on this ground.
    const uint64_t phys = pages <= 0 || page <= 0
                              ? UINT64_MAX
                              : static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    return std::min(phys, cgroup_memory_limit());
  }();
  return bytes;
}

void require_memory(double bytes, const std::string& what) {
  // In double: the estimates may exceed 64 bits.
  const double mem = static_cast<double>(physical_memory_bytes());
  SPGNN_CHECK(bytes <= mem, InvalidArgument, what, " would need ",
              static_cast<uint64_t>(std::min(bytes, 1e19) / 1048576), " MiB, more than this "
              "machine's ", static_cast<uint64_t>(mem / 1048576), " MiB of memory");
}

void check_fits_in_memory(const std::string& path, int64_t line, uint64_t bytes,
                          const std::string& what) {
  const uint64_t mem = physical_memory_bytes();
  if (bytes > mem) {
    throw_format(path, line,
                 what + " would need " + std::to_string(bytes >> 20) + " MiB, more than this "
                 "machine's " + std::to_string(mem >> 20) + " MiB of memory; refusing to allocate");
  }
}

void check_graph_fits(const std::string& path, int64_t line, int64_t n_rows, int64_t nnz,
                      const std::string& what) {
  // Saturated, the comparison still holds.
  const double bytes = graph_build_bytes(static_cast<double>(n_rows), static_cast<double>(nnz));
  check_fits_in_memory(path, line,
                       bytes >= 0x1p64 ? UINT64_MAX : static_cast<uint64_t>(bytes),
                       what + ": a graph of " + std::to_string(n_rows) + " vertices and " +
                           std::to_string(nnz) + " edges");
}

bool is_gzip_magic(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}
bool is_zstd_magic(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  return n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd;
}

std::string token_at(const char* p, const char* e) {
  const char* q = p;
  while (q < e && !is_blank(*q) && *q != '\n' && q - p < 40) ++q;
  std::string t(p, q);
  if (q < e && !is_blank(*q) && *q != '\n') t += "...";
  return t;
}

namespace {

[[noreturn]] void throw_errno(const std::string& path, const char* what) {
  const int err = errno;
  throw FormatError(path + ": " + what + ": " + std::strerror(err));
}

int open_for_read(const std::string& path, struct stat& st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno(path, "cannot open");
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw_errno(path, "cannot stat");
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw FormatError(path + ": is a directory, expected a file");
  }
  return fd;
}

// Reads the rest of fd into `out` (sized exactly for regular files, growing for pipes).
void read_all(int fd, const struct stat& st, const std::string& path, std::string& out) {
  size_t used = 0;
  if (S_ISREG(st.st_mode)) out.resize(static_cast<size_t>(st.st_size));
  else out.resize(1 << 20);
  for (;;) {
    if (used == out.size()) {
      if (S_ISREG(st.st_mode)) {
        // The file may have grown since fstat; one probe byte tells.
        char probe;
        const ssize_t r = ::read(fd, &probe, 1);
        if (r <= 0) break;
        out.push_back(probe);
        ++used;
      }
      // A pipe or device has no size to trust: grow geometrically, but never past the machine's
      // memory, so that an endless stream (/dev/zero) ends in a message naming it.
      const uint64_t mem = physical_memory_bytes();
      if (out.size() >= mem) {
        throw_format(path, 0, "input exceeds this machine's " + std::to_string(mem >> 20) +
                                  " MiB of memory; refusing to read more");
      }
      out.resize(static_cast<size_t>(std::min<uint64_t>(uint64_t(out.size()) * 2, mem)));
    }
    const size_t want = std::min<size_t>(out.size() - used, size_t{1} << 30);
    const ssize_t r = ::read(fd, &out[used], want);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(path, "read failed");
    }
    if (r == 0) break;
    used += static_cast<size_t>(r);
  }
  out.resize(used);
}

// Grows the decompression buffer geometrically, refusing outputs larger than physical memory
// (a few-KB "zip bomb" must fail with a message, not take the machine down).
void grow_output(std::string& out, size_t used, const std::string& path) {
  const uint64_t want = std::max<uint64_t>(uint64_t{1} << 20, uint64_t(used) * 2);
  const uint64_t mem = physical_memory_bytes();
  if (used >= mem) {
    throw_format(path, 0, "decompressed content exceeds this machine's " +
                              std::to_string(mem >> 20) + " MiB of memory");
  }
  out.resize(static_cast<size_t>(std::min(want, mem)));
}

std::string gunzip(const std::string& path, const std::string& in) {
  z_stream zs{};
  // 15 + 32: maximum window, accept both gzip and zlib headers.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw FormatError(path + ": zlib init failed");
  struct Guard {
    z_stream* z;
    ~Guard() { inflateEnd(z); }
  } guard{&zs};
  std::string out;
  out.resize(std::max<size_t>(in.size() * 4, 1 << 16));
  size_t used = 0, in_pos = 0;
  const auto* src = reinterpret_cast<const Bytef*>(in.data());
  zs.next_in = const_cast<Bytef*>(src);
  zs.avail_in = 0;
  for (;;) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      zs.next_in = const_cast<Bytef*>(src + in_pos);
      zs.avail_in = static_cast<uInt>(std::min<size_t>(in.size() - in_pos, size_t{1} << 30));
    }
    if (used == out.size()) grow_output(out, used, path);
    zs.next_out = reinterpret_cast<Bytef*>(&out[used]);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - used, size_t{1} << 30));
    const Bytef* next_in_before = zs.next_in;
    const int ret = inflate(&zs, Z_NO_FLUSH);
    used = static_cast<size_t>(reinterpret_cast<char*>(zs.next_out) - out.data());
    in_pos += static_cast<size_t>(zs.next_in - next_in_before);
    if (ret == Z_STREAM_END) {
      // Concatenated members (pigz, bgzip, `cat a.gz b.gz`) decompress to the concatenation.
      if (in_pos < in.size() && is_gzip_magic(src + in_pos, in.size() - in_pos)) {
        inflateReset(&zs);
        zs.avail_in = 0;
        continue;
      }
      const bool zeros = std::all_of(in.begin() + static_cast<std::ptrdiff_t>(in_pos), in.end(),
                                     [](char c) { return c == 0; });
      if (!zeros) throw_format(path, 0, "corrupt gzip data: garbage after the compressed stream");
      break;
    }
    if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT || ret == Z_STREAM_ERROR) {
      throw_format(path, 0, std::string("corrupt gzip data: ") + (zs.msg ? zs.msg : "inflate failed"));
    }
    if (ret == Z_MEM_ERROR) throw_format(path, 0, "out of memory while decompressing gzip data");
    if (in_pos == in.size() && zs.avail_in == 0 && zs.avail_out > 0) {
      throw_format(path, 0, "truncated gzip data: the compressed stream ends early after " +
                                std::to_string(used) + " decompressed bytes");
    }
  }
  out.resize(used);
  return out;
}

std::string unzstd(const std::string& path, const std::string& in) {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  if (!dctx) throw FormatError(path + ": zstd init failed");
  struct Guard {
    ZSTD_DCtx* d;
    ~Guard() { ZSTD_freeDCtx(d); }
  } guard{dctx};
  std::string out;
  const unsigned long long hint = ZSTD_getFrameContentSize(in.data(), in.size());
  size_t init = std::max<size_t>(in.size() * 4, 1 << 16);
  if (hint != ZSTD_CONTENTSIZE_UNKNOWN && hint != ZSTD_CONTENTSIZE_ERROR) {
    // The declared size is only a hint: a corrupt header could claim terabytes, so trust it up
    // to a generous ratio and let geometric growth take over beyond that.
    const uint64_t cap = std::max<uint64_t>(uint64_t(in.size()) * 32, uint64_t{1} << 26);
    init = static_cast<size_t>(std::min<uint64_t>(hint, cap)) + 1;  // +1: see the end in one go
  }
  out.resize(init);
  size_t used = 0;
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  for (;;) {
    if (used == out.size()) grow_output(out, used, path);
    ZSTD_outBuffer ob{&out[0], out.size(), used};
    const size_t ret = ZSTD_decompressStream(dctx, &ob, &ib);
    used = ob.pos;
    if (ZSTD_isError(ret)) throw_format(path, 0, std::string("corrupt zstd data: ") + ZSTD_getErrorName(ret));
    if (ib.pos == ib.size && ret == 0) break;
    if (ib.pos == ib.size && ob.pos < ob.size) {
      throw_format(path, 0, "truncated zstd data: the compressed stream ends early after " +
                                std::to_string(used) + " decompressed bytes");
    }
  }
  out.resize(used);
  return out;
}

std::string decompress_if_needed(const std::string& path, std::string raw) {
  if (is_gzip_magic(raw.data(), raw.size())) return gunzip(path, raw);
  if (is_zstd_magic(raw.data(), raw.size())) return unzstd(path, raw);
  return raw;
}

}  // namespace

// ---- InputFile ------------------------------------------------------------------------------------

InputFile::InputFile(const std::string& path) : path_(path) {
  struct stat st{};
  fd_ = open_for_read(path, st);
  unsigned char magic[4] = {0, 0, 0, 0};
  const ssize_t got = ::pread(fd_, magic, sizeof magic, 0);
  const size_t n = got > 0 ? static_cast<size_t>(got) : 0;
  if (!S_ISREG(st.st_mode) || is_gzip_magic(magic, n) || is_zstd_magic(magic, n)) {
    std::string raw;
    try {
      read_all(fd_, st, path, raw);
    } catch (...) {
      ::close(fd_);
      fd_ = -1;
      throw;
    }
    ::close(fd_);
    fd_ = -1;
    compressed_ = is_gzip_magic(raw.data(), raw.size()) || is_zstd_magic(raw.data(), raw.size());
    bytes_ = decompress_if_needed(path, std::move(raw));
    size_ = bytes_.size();
  } else {
    size_ = static_cast<uint64_t>(st.st_size);
  }
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    throw_format(path_, 0, "truncated: needed bytes " + std::to_string(offset) + ".." +
                               std::to_string(offset + n) + " but the " +
                               (compressed_ ? "decompressed content" : "file") + " has only " +
                               std::to_string(size_) + " bytes");
  }
  if (fd_ < 0) {
    if (n) std::memcpy(dst, bytes_.data() + offset, n);
    return;
  }
  auto* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const size_t want = std::min<size_t>(n - done, size_t{1} << 30);
    const ssize_t r = ::pread(fd_, out + done, want, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(path_, "read failed");
    }
    if (r == 0) throw_format(path_, 0, "truncated: file ended while reading (did it shrink?)");
    done += static_cast<size_t>(r);
  }
}

// ---- AtomicWriter ---------------------------------------------------------------------------------

AtomicWriter::AtomicWriter(const std::string& path) : path_(path), buf_(size_t{1} << 20) {
  std::random_device rd;
  const uint64_t r = (uint64_t(rd()) << 32) ^ rd();
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(r));
  tmp_ = path + suffix;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    throw Error("cannot write '" + path + "': cannot create temporary file '" + tmp_ +
                "': " + std::strerror(err));
  }
}

AtomicWriter::~AtomicWriter() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicWriter::fail(const std::string& what) {
  const int err = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  committed_ = true;  // nothing left for the destructor to clean up
  throw Error("cannot write '" + path_ + "': " + what + ": " + std::strerror(err));
}

void AtomicWriter::flush() {
  const char* p = buf_.data();
  size_t left = buf_used_;
  while (left > 0) {
    const ssize_t r = ::write(fd_, p, std::min<size_t>(left, size_t{1} << 30));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("write failed");
    }
    p += r;
    left -= static_cast<size_t>(r);
  }
  buf_used_ = 0;
}

void AtomicWriter::write(const void* data, size_t n) {
  if (fd_ < 0) throw Error("cannot write '" + path_ + "': writer already closed");
  const char* p = static_cast<const char*>(data);
  written_ += n;
  if (buf_used_ + n <= buf_.size()) {
    if (n) std::memcpy(buf_.data() + buf_used_, p, n);
    buf_used_ += n;
    return;
  }
  flush();
  // Large blocks (arrays, formatted chunks) go straight to the kernel without a copy.
  while (n > 0) {
    const ssize_t r = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("write failed");
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void AtomicWriter::pad_to(size_t alignment) {
  static const char kZeros[256] = {};
  size_t pad = static_cast<size_t>((alignment - written_ % alignment) % alignment);
  while (pad > 0) {
    const size_t k = std::min(pad, sizeof kZeros);
    write(kZeros, k);
    pad -= k;
  }
}

void AtomicWriter::commit() {
  flush();
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  if (::fsync(fd_) != 0) fail("fsync failed");
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("close failed");
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename of '" + tmp_ + "' failed");
  committed_ = true;
  // Persist the rename itself (best effort: some filesystems refuse fsync on directories).
  const size_t slash = path_.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace io

std::string read_file_decompressed(const std::string& path) {
  struct stat st{};
  const int fd = io::open_for_read(path, st);
  std::string raw;
  try {
    io::read_all(fd, st, path, raw);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return io::decompress_if_needed(path, std::move(raw));
}

void write_file_atomic(const std::string& path, const void* bytes, size_t n) {
  io::AtomicWriter w(path);
  w.write(bytes, n);
  w.commit();
}

}  // namespace spgnn
