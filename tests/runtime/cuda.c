/* The CUDA loader. Without a driver (as on CPU-only machines) opening fails
 * with the exact line users see; with a GPU, memory round-trips and a small
 * PTX kernel runs. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "tfmrt.h"

#include <dlfcn.h>
#include <string.h>

static const char no_driver[] =
    "no CUDA driver found (libcuda.so.1): build with --target cpu or run on a machine with an "
    "NVIDIA GPU";

/* data[i] += 1 for i < n. */
static const char add_one_ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry add_one(.param .u64 data, .param .u32 n)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .f32 %f<3>;\n"
    "  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [data];\n"
    "  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  mov.u32 %r3, %ntid.x;\n"
    "  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.u32 %p1, %r5, %r1;\n"
    "  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mul.wide.u32 %rd3, %r5, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n"
    "  ld.global.f32 %f1, [%rd4];\n"
    "  add.f32 %f2, %f1, 0f3F800000;\n"
    "  st.global.f32 [%rd4], %f2;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

static void exercise_device(tfm_cuda *cuda) {
  enum { N = 1000 };
  float host[N], back[N];
  for (int i = 0; i < N; i++) host[i] = (float)i;
  tfm_device_ptr data = 0;
  tfm_cuda_module module = NULL;
  tfm_cuda_kernel kernel = NULL;
  CHECK_OK(tfm_cuda_alloc(cuda, sizeof host, &data));
  CHECK_OK(tfm_cuda_upload(cuda, data, host, sizeof host));
  CHECK_OK(tfm_cuda_module_load(cuda, add_one_ptx, &module));
  CHECK_OK(tfm_cuda_kernel_get(cuda, module, "add_one", &kernel));
  CHECK_REFUSED(tfm_cuda_kernel_get(cuda, module, "no_such_kernel", &kernel), NULL,
                "cuModuleGetFunction(\"no_such_kernel\") failed");
  CHECK_OK(tfm_cuda_kernel_get(cuda, module, "add_one", &kernel));
  unsigned n = N, grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  void *params[] = {&data, &n};
  CHECK_OK(tfm_cuda_launch(cuda, kernel, grid, block, 0, params));
  CHECK_OK(tfm_cuda_synchronize(cuda));
  CHECK_OK(tfm_cuda_download(cuda, back, data, sizeof back));
  size_t wrong = 0;
  for (int i = 0; i < N; i++) wrong += back[i] != host[i] + 1;
  CHECK(wrong == 0);
  CHECK_OK(tfm_cuda_free(cuda, data));
  CHECK_REFUSED(tfm_cuda_module_load(cuda, ".version 7.0\n.target sm_75\nnot ptx\n", &module),
                NULL, "cuModuleLoadDataEx failed");
}

int main(void) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  tfm_cuda *cuda = NULL;
  int status = tfm_cuda_open(&cuda, 0);
  if (!driver) {
    CHECK(status != TFM_OK);
    if (strcmp(tfm_error(), no_driver) != 0) {
      fprintf(stderr, "without a driver: \"%s\"\nexpected:          \"%s\"\n", tfm_error(),
              no_driver);
      check_failures++;
    }
    printf("no driver here; the loader reports: %s\n", tfm_error());
  } else if (status != TFM_OK) {
    /* A driver without a device is the only expected failure. */
    CHECK(strncmp(tfm_error(), "no CUDA device found: ", 22) == 0);
    printf("driver without a device; the loader reports: %s\n", tfm_error());
  } else {
    exercise_device(cuda);
    tfm_cuda *other = NULL;
    CHECK_REFUSED(tfm_cuda_open(&other, 4096), NULL, "device 4096 requested");
    tfm_cuda_close(cuda);
  }
  if (driver) dlclose(driver);
  return check_result("cuda");
}
