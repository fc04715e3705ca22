/* The OpenMPI anchor of bench/comm_vs_mpi.py: times MPI_Allreduce (float32 sum, in place, as
 * `ringmaster-node bench-comm` does) the way nccl-tests times a collective: w warm-up operations,
 * a barrier, n timed ones, the slowest rank's mean. Rank 0 prints bench-comm's table (same
 * columns), so one parser reads both. Which transport it measures is mpirun's choice (`--mca btl
 * ...`).
 *
 *   mpirun -np 2 mpi_collectives -b 4K -e 64M -f 4 -n 20 -w 5 -t 4M
 *   mpirun -np 2 mpi_collectives -s 4K,64K,1M,16M,64M
 *
 * -s lists the sizes instead of the -b / -e / -f sweep. -t scales the timed operations with the
 * size: max(n, t / bytes), so that small sizes last long enough to time. Each size is checked once
 * before it is timed: rank r contributes (r + 1) * (i % 7 + 1) at element i, whose sum is exact in
 * float32. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kMaxSizes = 64 };

typedef struct {
  long sizes[kMaxSizes];
  int size_count;
  long iters, warmup, target_bytes;
} Options;

/* "64K", "16M", "1G" or plain bytes; -1 when the text is not a size. */
static long parseSize(const char* text) {
  char* end = NULL;
  long value = strtol(text, &end, 10);
  if (end == text || value < 0) return -1;
  switch (*end) {
    case '\0':
      return value;
    case 'K':
    case 'k':
      value <<= 10;
      break;
    case 'M':
    case 'm':
      value <<= 20;
      break;
    case 'G':
    case 'g':
      value <<= 30;
      break;
    default:
      return -1;
  }
  return end[1] == '\0' ? value : -1;
}

/* "4K,64K,1M": the sizes in o->sizes; 0 when one is not a size of at least 4 bytes. */
static int parseSizeList(char* text, Options* o) {
  o->size_count = 0;
  for (char* item = strtok(text, ","); item != NULL; item = strtok(NULL, ",")) {
    long value = parseSize(item);
    if (value < 4 || o->size_count == kMaxSizes) return 0;
    o->sizes[o->size_count++] = value;
  }
  return o->size_count > 0;
}

static int parseOptions(int argc, char** argv, Options* o) {
  long min_bytes = 4096, max_bytes = 64L << 20, step_factor = 4;
  *o = (Options){.iters = 20, .warmup = 5};
  int c;
  while ((c = getopt(argc, argv, "b:e:f:n:w:t:s:")) != -1) {
    if (c == 's') {
      if (!parseSizeList(optarg, o)) return 0;
      continue;
    }
    long value = parseSize(optarg);
    if (value < 0) return 0;
    switch (c) {
      case 'b':
        min_bytes = value;
        break;
      case 'e':
        max_bytes = value;
        break;
      case 'f':
        step_factor = value;
        break;
      case 'n':
        o->iters = value;
        break;
      case 'w':
        o->warmup = value;
        break;
      case 't':
        o->target_bytes = value;
        break;
      default:
        return 0;
    }
  }
  if (optind != argc || o->iters < 1 || min_bytes < 4 || step_factor < 2) return 0;
  if (o->size_count == 0) {
    for (long bytes = min_bytes; bytes <= max_bytes && o->size_count < kMaxSizes;
         bytes *= step_factor)
      o->sizes[o->size_count++] = bytes;
  }
  return o->size_count > 0;
}

static void fillInput(float* data, long count, int rank) {
  for (long i = 0; i < count; ++i) data[i] = (float)((rank + 1) * (i % 7 + 1));
}

/* The elements of one all-reduce's result that differ from the exact sum. */
static long countWrong(const float* data, long count, int ranks) {
  const float rank_sum = (float)(ranks * (ranks + 1) / 2);
  long wrong = 0;
  for (long i = 0; i < count; ++i) wrong += data[i] != rank_sum * (float)(i % 7 + 1);
  return wrong;
}

/* One size: a checked operation, the warm-up, then the timed ones; returns the wrong elements
 * summed over ranks and sets *us to the slowest rank's mean time per operation. */
static long timeAllReduce(float* data, long count, long iters, long warmup, double* us) {
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  fillInput(data, count, rank);
  MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  long wrong = countWrong(data, count, ranks), wrong_sum = 0;
  MPI_Reduce(&wrong, &wrong_sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

  for (long i = 0; i < warmup; ++i)
    MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (long i = 0; i < iters; ++i)
    MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const double mean_us = (MPI_Wtime() - start) * 1e6 / (double)iters;
  MPI_Reduce(&mean_us, us, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return wrong_sum;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Options o;
  if (!parseOptions(argc, argv, &o)) {
    if (rank == 0)
      fprintf(stderr,
              "usage: mpi_collectives [-b min] [-e max] [-f factor] [-n iters] "
              "[-w warmup] [-t target bytes] (sizes take K / M / G)\n");
    MPI_Finalize();
    return 2;
  }
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int length;
  MPI_Get_library_version(library, &length);
  if (rank == 0) {
    printf("# mpi_collectives: all_reduce on %d rank(s), %.*s\n", ranks,
           (int)strcspn(library, ",\n"), library);
    printf(
        "# sizes %d from %ld to %ld bytes, warmup iters: %ld iters: %ld (or %ld bytes' worth) "
        "validation: 1\n#\n",
        o.size_count, o.sizes[0], o.sizes[o.size_count - 1], o.warmup, o.iters, o.target_bytes);
    printf("#%14s %12s %9s %10s %6s %10s %8s %8s %7s  %s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong", "op");
    printf("#%14s %12s %9s %10s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "(us)",
           "(GB/s)", "(GB/s)", "");
  }
  long max_bytes = 0;
  for (int s = 0; s < o.size_count; ++s)
    max_bytes = o.sizes[s] > max_bytes ? o.sizes[s] : max_bytes;
  float* data = malloc((size_t)max_bytes);
  long failed = 0;
  for (int s = 0; s < o.size_count; ++s) {
    const long bytes = o.sizes[s], count = bytes / 4;
    long iters = o.target_bytes / bytes;
    if (iters < o.iters) iters = o.iters;
    double us = 0;
    const long wrong = timeAllReduce(data, count, iters, o.warmup, &us);
    failed += wrong;
    if (rank == 0) {
      const double algbw = (double)(count * 4) / (us * 1e3);
      const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
      printf(" %14ld %12ld %9s %10s %6d %10.1f %8.3f %8.3f %7ld  %s\n", count * 4, count, "float32",
             "sum", -1, us, algbw, busbw, wrong, "all_reduce");
      fflush(stdout);
    }
  }
  if (rank == 0) printf("# Out of bounds values : %ld %s\n#\n", failed, failed ? "FAILED" : "OK");
  free(data);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
