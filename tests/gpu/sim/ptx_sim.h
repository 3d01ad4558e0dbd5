/* A PTX interpreter for testing tfm's GPU backend without a GPU.
 *
 * It runs the PTX text tfm emits (the very text a driver would JIT), one
 * instruction at a time on the CPU, with CUDA's execution model where it
 * matters to correctness: blocks of threads, warps of 32 whose shfl.sync and
 * mma.sync every lane must reach together (a lane that exited or waits
 * elsewhere is reported, as run 6 of stop 18 needed: an mma.sync sunk under
 * a branch), bar.sync across the block, shared memory per block, local
 * memory per thread. Every load and store is checked against the device
 * allocations, the block's shared memory and the thread's local memory,
 * and shared memory for races (two threads' accesses, one a write, with
 * no barrier between).
 * Device memory comes from cuMemAlloc filled with 0xff bytes (NaN as f32),
 * so a kernel that reads what nothing wrote shows it.
 *
 * Stricter than the ISA: a warp's lanes must meet at the same shfl.sync
 * (tfm's shuffles are converged by construction), as they must at an
 * mma.sync or a bar.sync (.aligned). A barrier waits only for the threads
 * that have not exited, as the ISA says.
 *
 * Not modelled: timing, the memory model between blocks (blocks run one
 * after another), approximate instructions' exact error (ex2.approx is
 * exp2), tensor-core accumulation order (mma sums in f32, k in order).
 * Instructions it cannot give their exact meaning (f16 arithmetic,
 * roundings other than to nearest, integer saturation) are refused when
 * the module is loaded. driver.c puts
 * it behind the CUDA driver API as a libcuda.so.1 (tests/gpu/CMakeLists.txt). */
#ifndef TFM_PTX_SIM_H
#define TFM_PTX_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct PtxModule PtxModule;
typedef struct PtxEntry PtxEntry;

/* Parses PTX text; NULL with a message "line N: ..." in err. */
PtxModule *ptx_sim_parse(const char *text, char *err, size_t err_size);
void ptx_sim_free(PtxModule *module);
const PtxEntry *ptx_sim_entry(const PtxModule *module, const char *name);

/* Memory the kernels may touch: [base, base + bytes). */
void ptx_sim_add_region(uintptr_t base, size_t bytes);
void ptx_sim_remove_region(uintptr_t base);
/* Whether [base, base + bytes) lies inside one of those regions. */
bool ptx_sim_inside(uintptr_t base, size_t bytes);

/* Runs a launch of the entry, of grid x block threads (x axes only, as tfm launches);
 * params[i] points at parameter i's value. 0, or -1 with a message
 * naming the kernel, block, thread and PTX line in err. */
int ptx_sim_launch(const PtxEntry *entry, unsigned grid, unsigned block, void **params,
                   char *err, size_t err_size);

/* An entry's parameters: how many, and parameter i's size in bytes (what
 * a CUDA graph's kernel node copies from params[i] when it is added). */
int ptx_sim_num_params(const PtxEntry *entry);
size_t ptx_sim_param_bytes(const PtxEntry *entry, int i);

#endif
