// spgnn: the command-line front end. Thin by design: parse flags, call the public API, print.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "spgnn/commands.hpp"
#include "spgnn/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"spgnn: fast sparse kernels and full-batch training for graph neural networks"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "spgnn 0.1.0");
  spgnn::cli::register_generate(app);
  spgnn::cli::register_convert(app);
  spgnn::cli::register_info(app);
  spgnn::cli::register_bench(app);
  spgnn::cli::register_strategies(app);
  spgnn::cli::register_train(app);
  spgnn::cli::register_tune(app);
  spgnn::cli::register_partition(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const spgnn::Error& e) {
    std::fprintf(stderr, "spgnn: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // Inputs and generators are checked against memory up front; what remains comes from the
    // sizes the flags ask for (--hidden, --heads, --layers, --features, --dim, --reps).
    std::fprintf(stderr, "spgnn: error: out of memory: the sizes this command asks for do not fit "
                         "this machine (check flags such as --hidden, --heads, --features, --dim)\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spgnn: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
