// The layout advisor's measurements of these hosts (issue 37): a short GEMM probe of one rank's
// matrix-product throughput while every rank of its host computes, and the collectives' latency and
// bandwidth per group size as `bench-comm` measures them, kept in a file beside the run database
// (owner-only) per host set, so that they are measured once. Only local host sets are measured
// here: ranks on other hosts would need the probe started there.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "plan/layout_cost.h"

namespace ringmaster::plan {

// One rank's FLOP/s on a (256 x 1024) by (1024 x 1024) product in `precision`, `concurrent`
// ranks computing at once (threads, each with one BLAS thread as a worker has), over `iterations`
// timed products after one warm-up. On the CPU unless `device` is CUDA.
double probeMatmulFlops(Precision precision, int concurrent, Device device = Device::cpu(),
                        int iterations = 3);

// The collectives' curves on `ranks` local ranks (threads over a loopback store, shared memory as
// a run's one-host groups use): all_reduce, all_gather, reduce_scatter, and sendrecv where ranks
// is 2, each timed at `small_bytes` and `large_bytes` (latency and bandwidth from the two).
std::vector<CommCurve> probeCommCurves(int ranks, uint64_t small_bytes = 4096,
                                       uint64_t large_bytes = 4u << 20, int iterations = 5);

// The measurements a spec's layouts need: each precision's throughput with the most ranks any host
// runs, and the curves of every group size a mesh of its world can have (2 always, for sendrecv).
// Throws kUnavailable for a spec with a remote host or a scheduler.
Measurements measureHosts(const JobSpec& spec, const std::vector<Precision>& precisions);

// What identifies a host set: "cpu localhost:4" (where the ranks compute, cpu or cuda, then each
// host with its ranks).
std::string hostSetKey(const JobSpec& spec);

// The file beside the database that keeps them: DB_PATH.plan-measurements.json.
std::filesystem::path measurementsPath(const std::string& db_path);

// The host set's measurements from the file, else (or with `remeasure`) measured by `measure` and
// written back (0600, the other host sets' kept). `measured_now` says which it was.
Measurements keptMeasurements(const std::filesystem::path& file, const std::string& key,
                              bool remeasure, const std::function<Measurements()>& measure,
                              bool* measured_now = nullptr);

}  // namespace ringmaster::plan
