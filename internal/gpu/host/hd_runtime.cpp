// hd_runtime.cpp - executes the generated kernel trampolines on the CPU.
//
// Groups are spread over a small thread pool (the calling thread helps). A barrier-free kernel
// runs each group as a plain loop over its work items. A kernel with threadgroup memory or
// threadgroup_barrier runs each work item of a group on its own fiber (a stack of its own) on one
// OS thread: threadgroup_barrier() switches to the next item of the group, and after the last
// one the round starts again at item 0, so every item has reached the barrier before any passes.
// Fibers switch with a hand-written routine on x86-64 and aarch64, with ucontext elsewhere.
#if defined(__APPLE__)
#define _XOPEN_SOURCE 700  // ucontext (fallback) on macOS
#define _DARWIN_C_SOURCE 1
#endif
#include "hd_runtime.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace {

constexpr size_t kStackSize = 64 * 1024;  // per work item; kernels are small and inlined
constexpr unsigned kMaxThreadsPerGroup = 1024;
constexpr unsigned kTGAlign = 16;
constexpr unsigned kMaxTG = 16;

// hd_ctx_switch(save, to): save the callee-saved registers (and the FP control state) on the
// current stack, store the stack pointer in *save, switch to the stack `to` and restore the same
// frame from there. A new fiber's stack holds a frame whose return address is fiber_entry.
extern "C" void hd_ctx_switch(void** save, void* to);

#if defined(__x86_64__) && defined(__ELF__)
#define HD_ASM_SWITCH "x86-64"
#define HD_HAVE_ASM 1
// Frame (low to high): [mxcsr|x87 cw] r15 r14 r13 r12 rbx rbp ret.
constexpr int kFrameWords = 9;  // + a zero fake return address for fiber_entry's alignment
asm(R"(
  .text
  .globl hd_ctx_switch
  .hidden hd_ctx_switch
  .type hd_ctx_switch,@function
  .p2align 4
hd_ctx_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size hd_ctx_switch,.-hd_ctx_switch
)");
void init_frame(uint64_t* s, void (*entry)()) {  // s: kFrameWords words below the stack top
  s[0] = 0x1F80 | (uint64_t(0x037F) << 32);       // default MXCSR, x87 control word
  s[7] = reinterpret_cast<uint64_t>(entry);
}

#elif defined(__aarch64__) && (defined(__ELF__) || defined(__APPLE__))
#define HD_ASM_SWITCH "aarch64"
#define HD_HAVE_ASM 1
// AAPCS64 callee-saved state: x19-x28, x29 (fp), x30 (lr), d8-d15 (low halves of v8-v15), FPCR.
// Frame (176 bytes, 16-aligned), by byte offset: 0 x19 x20, 16 x21 x22, 32 x23 x24, 48 x25 x26,
// 64 x27 x28, 80 x29 x30, 96 d8 d9, 112 d10 d11, 128 d12 d13, 144 d14 d15, 160 fpcr, 168 pad.
// `ret` jumps to the restored x30. x18 (the platform register on Apple) is left alone.
constexpr int kFrameWords = 22;
#if defined(__APPLE__)
#define HD_SYM "_hd_ctx_switch"
#define HD_SYM_HEADER ".globl _hd_ctx_switch\n  .private_extern _hd_ctx_switch\n"
#define HD_SYM_FOOTER ""
#else
#define HD_SYM "hd_ctx_switch"
#define HD_SYM_HEADER ".globl hd_ctx_switch\n  .hidden hd_ctx_switch\n  .type hd_ctx_switch,%function\n"
#define HD_SYM_FOOTER ".size hd_ctx_switch,.-hd_ctx_switch\n"
#endif
asm("  .text\n  " HD_SYM_HEADER "  .p2align 4\n" HD_SYM ":\n"
    R"(
  sub sp, sp, #176
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mrs x9, fpcr
  str x9, [sp, #160]
  mov x9, sp
  str x9, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  ldr x9, [sp, #160]
  msr fpcr, x9
  add sp, sp, #176
  ret
)"
    "  " HD_SYM_FOOTER);
void init_frame(uint64_t* s, void (*entry)()) {  // s: the 176-byte frame at the stack top
  uint64_t fpcr;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
  s[11] = reinterpret_cast<uint64_t>(entry);  // x30: where `ret` goes; x29 = 0 ends the chain
  s[20] = fpcr;
}

#else
#define HD_ASM_SWITCH "ucontext"
#define HD_HAVE_ASM 0  // other targets: ucontext (a syscall per switch on some systems)
constexpr int kFrameWords = 2;
extern "C" void hd_ctx_switch(void**, void*) { abort(); }
void init_frame(uint64_t*, void (*)()) {}
#endif

const bool kHaveAsm = HD_HAVE_ASM != 0;
std::atomic<int> g_use_ucontext{!kHaveAsm};
const bool g_poison = getenv("HD_POISON") != nullptr;  // fill threadgroup memory with 0xA5

struct Job;

// Per-OS-thread fiber set for running one threadgroup at a time.
struct Fibers {
  unsigned char* mem = nullptr;  // stacks, each above a guard page
  unsigned cap = 0;
  std::vector<void*> sp;       // saved stack pointers; [n] is the scheduler
  std::vector<ucontext_t> uc;  // same for the ucontext implementation
  std::vector<unsigned char> done;
  bool uctx = false;

  // the group being run
  const Job* job = nullptr;
  hd_u3 gp{};
  unsigned char* const* tg = nullptr;
  unsigned n = 0, cur = 0, arrived = 0, finished = 0;
  bool diverged = false;

  ~Fibers() {
    if (mem) munmap(mem, size_t(cap) * (kStackSize + page()));
  }
  static size_t page() { return size_t(sysconf(_SC_PAGESIZE)); }
  unsigned char* stack_base(unsigned i) { return mem + size_t(i) * (kStackSize + page()) + page(); }

  bool reserve(unsigned want) {
    if (want <= cap) return true;
    if (mem) munmap(mem, size_t(cap) * (kStackSize + page()));
    mem = nullptr;
    cap = 0;
    size_t len = size_t(want) * (kStackSize + page());
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    mem = static_cast<unsigned char*>(p);
    cap = want;
    for (unsigned i = 0; i < cap; i++) mprotect(stack_base(i) - page(), page(), PROT_NONE);
    sp.assign(cap + 1, nullptr);
    uc.resize(cap + 1);
    done.assign(cap, 0);
    return true;
  }

  void run_group(const Job* j, hd_u3 gp_, unsigned char* const* tg_, unsigned n_);
  void switch_to(unsigned from, unsigned to);
  void yield_from(unsigned i);
};

thread_local Fibers* tl_fibers = nullptr;  // set while a fiber group runs on this thread
thread_local const Job* tl_job = nullptr;  // set while this thread works on a dispatch

struct Job {
  const hd_kernel* k;
  hd_group_fn group;  // k->group or its copy for the dispatch's instruction set
  hd_launch L;
  unsigned tg_off[kMaxTG];
  unsigned ntg;
  size_t tg_total;
  uint64_t ngroups, chunk;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  mutable std::mutex err_mu;
  mutable std::string err;

  void fail(const std::string& msg) const {
    std::lock_guard<std::mutex> lk(err_mu);
    if (err.empty()) err = msg;
    const_cast<Job*>(this)->failed.store(true, std::memory_order_relaxed);
  }
};

void fiber_entry();

void Fibers::switch_to(unsigned from, unsigned to) {
  if (uctx)
    swapcontext(&uc[from], &uc[to]);
  else
    hd_ctx_switch(&sp[from], sp[to]);
}

// Fiber i reached a barrier or finished: continue with the next live fiber of the round.
void Fibers::yield_from(unsigned i) {
  unsigned j = i + 1;
  while (j < n && done[j]) j++;
  if (j == n) {                         // round complete
    if (arrived == 0) switch_to(i, n);  // everyone finished: back to the scheduler, never returns
    if (finished != 0) diverged = true;  // some items left while others wait at a barrier
    arrived = finished = 0;
    for (j = 0; done[j]; j++) {
    }
  }
  cur = j;
  if (j != i) switch_to(i, j);
}

void Fibers::run_group(const Job* j, hd_u3 gp_, unsigned char* const* tg_, unsigned n_) {
  if (!reserve(n_)) {
    j->fail(std::string(j->k->name) + ": cannot map fiber stacks");
    return;
  }
  job = j, gp = gp_, tg = tg_, n = n_;
  uctx = g_use_ucontext.load(std::memory_order_relaxed);
  cur = arrived = finished = 0;
  diverged = false;
  std::memset(done.data(), 0, n);
  for (unsigned i = 0; i < n; i++) {
    unsigned char* top = stack_base(i) + kStackSize;
    if (uctx) {
      getcontext(&uc[i]);
      uc[i].uc_stack.ss_sp = stack_base(i);
      uc[i].uc_stack.ss_size = kStackSize;
      uc[i].uc_link = nullptr;
      makecontext(&uc[i], fiber_entry, 0);
    } else {
      uint64_t* s = reinterpret_cast<uint64_t*>(top) - kFrameWords;
      std::memset(s, 0, kFrameWords * sizeof(uint64_t));
      init_frame(s, &fiber_entry);
      sp[i] = s;
    }
  }
  Fibers* saved = tl_fibers;
  tl_fibers = this;
  switch_to(n, 0);
  tl_fibers = saved;
  if (diverged) job->fail(std::string(job->k->name) + ": threadgroup_barrier not reached by all threads of a group");
}

void fiber_entry() {
  Fibers* f = tl_fibers;
  unsigned i = f->cur;
  const hd_launch& L = f->job->L;
  hd_u3 lp{i % L.tpg.x, (i / L.tpg.x) % L.tpg.y, i / (L.tpg.x * L.tpg.y)};
  f->job->k->item(&L, f->gp, lp, f->tg);
  f = tl_fibers;
  f->done[i] = 1;
  f->finished++;
  f->yield_from(i);
  abort();  // unreachable: a finished fiber is never resumed
}

thread_local std::vector<unsigned char> tl_tgmem;
thread_local Fibers tl_fiber_set;

void run_range(const Job& j) {
  const hd_kernel* k = j.k;
  const hd_launch& L = j.L;
  unsigned tpg_n = L.tpg.x * L.tpg.y * L.tpg.z;
  if (tl_tgmem.size() < j.tg_total + kTGAlign) tl_tgmem.resize(j.tg_total + kTGAlign);
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(tl_tgmem.data()) + kTGAlign - 1) & ~uintptr_t(kTGAlign - 1));
  unsigned char* tg[kMaxTG];
  for (unsigned i = 0; i < j.ntg; i++) tg[i] = base + j.tg_off[i];
  tl_job = &j;
  for (;;) {
    if (j.failed.load(std::memory_order_relaxed)) break;
    uint64_t g0 = const_cast<Job&>(j).next.fetch_add(j.chunk, std::memory_order_relaxed);
    if (g0 >= j.ngroups) break;
    uint64_t g1 = g0 + j.chunk < j.ngroups ? g0 + j.chunk : j.ngroups;
    for (uint64_t g = g0; g < g1; g++) {
      hd_u3 gp{unsigned(g % L.groups.x), unsigned(g / L.groups.x % L.groups.y),
               unsigned(g / (uint64_t(L.groups.x) * L.groups.y))};
      if (g_poison && j.tg_total) std::memset(base, 0xA5, j.tg_total);
      if (k->uses_barrier && tpg_n > 1)
        tl_fiber_set.run_group(&j, gp, tg, tpg_n);
      else
        j.group(&L, gp, tg);
    }
  }
  tl_job = nullptr;
}

// A minimal pool: workers sleep on a condition variable between dispatches. The dispatching
// thread works too, and waits only for the workers that joined the dispatch before it had taken
// every chunk: a worker still waiting for a core when the work ran out skips it. (It waited for
// every worker to wake up before: with other processes on the cores, each of a proof's thousands
// of dispatches paid a scheduler's wake-up latency, milliseconds; issue 25.)
class Pool {
 public:
  void set_workers(int n) {
    std::lock_guard<std::mutex> serial(dispatch_mu_);
    stop_all();
    if (n < 1) n = int(std::thread::hardware_concurrency());  // 0: default
    nworkers_ = n < 1 ? 1 : n;
    for (int i = 1; i < nworkers_; i++) threads_.emplace_back([this, g = gen_] { loop(g); });
  }
  int workers() {
    std::lock_guard<std::mutex> serial(dispatch_mu_);
    return ensure();
  }
  void run(Job& j) {
    std::lock_guard<std::mutex> serial(dispatch_mu_);  // one dispatch at a time (like a queue)
    ensure();
    j.chunk = j.ngroups / (uint64_t(nworkers_) * 8);
    if (j.chunk == 0) j.chunk = 1;
    if (nworkers_ == 1 || j.ngroups <= j.chunk) {
      run_range(j);
      return;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      job_ = &j;
      open_ = true;
      gen_++;
    }
    cv_.notify_all();
    run_range(j);  // returns once every chunk is taken (or the job failed)
    std::unique_lock<std::mutex> lk(mu_);
    open_ = false;  // workers waking from now on skip this dispatch
    done_cv_.wait(lk, [this] { return active_ == 0; });
    job_ = nullptr;
  }

 private:
  int ensure() {  // dispatch_mu_ held
    if (nworkers_ == 0) {
      int n = int(std::thread::hardware_concurrency());
      nworkers_ = n < 1 ? 1 : n;
      for (int i = 1; i < nworkers_; i++) threads_.emplace_back([this, g = gen_] { loop(g); });
    }
    return nworkers_;
  }
  void loop(uint64_t seen) {  // seen: the last dispatch generation this worker took part in
    for (;;) {
      Job* j;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || gen_ != seen; });
        if (stop_) return;
        seen = gen_;
        if (!open_) continue;  // the dispatcher took the rest already
        active_++;
        j = job_;
      }
      run_range(*j);
      std::lock_guard<std::mutex> lk(mu_);
      if (--active_ == 0) done_cv_.notify_one();
    }
  }
  void stop_all() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    stop_ = false;
  }

  std::mutex dispatch_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> threads_;
  Job* job_ = nullptr;
  uint64_t gen_ = 0;
  int active_ = 0, nworkers_ = 0;  // active_: workers inside the open or closing dispatch
  bool open_ = false, stop_ = false;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: workers may outlive static destructors
  return *p;
}

// cpu_isa: the highest level whose every instruction the CPU has and whose register state the OS
// saves (XGETBV), as GCC and Clang define the levels: x86-64-v3 = v2 (SSE3, SSSE3, SSE4.1/4.2,
// POPCNT, CMPXCHG16B, LAHF) + AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT, MOVBE, XSAVE;
// x86-64-v4 = v3 + AVX512F, AVX512BW, AVX512CD, AVX512DQ, AVX512VL. Checked bit by bit rather than
// with __builtin_cpu_supports, whose level names Clang 14 lacks.
int cpu_isa() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return HD_ISA_BASELINE;
  const unsigned c1 = c;
  auto has = [](unsigned reg, std::initializer_list<int> bits) {
    for (int i : bits)
      if (!(reg >> i & 1)) return false;
    return true;
  };
  // SSE3, SSSE3, FMA, CX16, SSE4.1, SSE4.2, MOVBE, POPCNT, XSAVE, OSXSAVE, AVX, F16C
  if (!has(c1, {0, 9, 12, 13, 19, 20, 22, 23, 26, 27, 28, 29})) return HD_ISA_BASELINE;
  if (!__get_cpuid(0x80000001, &a, &b, &c, &d) || !has(c, {0, 5})) return HD_ISA_BASELINE;  // LAHF, LZCNT
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return HD_ISA_BASELINE;
  const unsigned b7 = b;
  unsigned xlo, xhi;
  __asm__ __volatile__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  if ((xlo & 0x6) != 0x6 || !has(b7, {3, 5, 8})) return HD_ISA_BASELINE;  // XMM+YMM state; BMI1, AVX2, BMI2
  // opmask, ZMM_Hi256, Hi16_ZMM state; AVX512F, AVX512DQ, AVX512CD, AVX512BW, AVX512VL
  if ((xlo & 0xE0) != 0xE0 || !has(b7, {16, 17, 28, 30, 31})) return HD_ISA_X86_64_V3;
  return HD_ISA_X86_64_V4;
#else
  return HD_ISA_BASELINE;
#endif
}

// group_for: the kernel's group trampoline for the highest level ≤ isa that it was compiled for.
hd_group_fn group_for(const hd_kernel* k, int isa) {
  for (int l = isa; l > HD_ISA_BASELINE; l--)
    if (hd_group_fn f = k->group_isa[l - 1]) return f;
  return k->group;
}

}  // namespace

extern "C" void hd_threadgroup_barrier(void) {
  if (Fibers* f = tl_fibers) {
    f->arrived++;
    f->yield_from(f->cur);
    return;
  }
  // Not on a fiber: either a 1-thread group (no-op) or mslgen classified the kernel barrier-free.
  const Job* j = tl_job;
  if (j && j->L.tpg.x * j->L.tpg.y * j->L.tpg.z > 1)
    j->fail(std::string(j->k->name) + ": threadgroup_barrier in a kernel classified barrier-free");
}

extern "C" int hd_isa_supported(void) {
  static const int level = [] {
    bool built = false;  // does this build have the copies at all (x86-64 without HD_NO_CLONES)?
    for (int i = 0; i < hd_nkernels; i++) built = built || hd_kernels[i].group_isa[0] || hd_kernels[i].group_isa[1];
    return built ? cpu_isa() : HD_ISA_BASELINE;
  }();
  return level;
}

extern "C" const char* hd_isa_name(int isa) {
  switch (isa) {
    case HD_ISA_X86_64_V3: return "x86-64-v3";
    case HD_ISA_X86_64_V4: return "x86-64-v4";
  }
#if defined(__x86_64__)
  return "x86-64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "baseline";
#endif
}

extern "C" int hd_dispatch(int kernel, int isa, hd_u3 groups, hd_u3 tpg, void* const* bufs,
                           const unsigned* tg_len, char* err, int errlen) {
  if (kernel < 0 || kernel >= hd_nkernels) {
    snprintf(err, size_t(errlen), "bad kernel id");
    return -1;
  }
  return hd_dispatch_kernel(&hd_kernels[kernel], isa, groups, tpg, bufs, tg_len, err, errlen);
}

extern "C" int hd_dispatch_kernel(const hd_kernel* k, int isa, hd_u3 groups, hd_u3 tpg, void* const* bufs,
                                  const unsigned* tg_len, char* err, int errlen) {
  auto fail = [&](const std::string& m) {
    snprintf(err, size_t(errlen), "%s", m.c_str());
    return -1;
  };
  if (k == nullptr || k->group == nullptr || (k->uses_barrier && k->item == nullptr)) return fail("incomplete kernel entry");
  Job j;
  j.k = k;
  if (isa < HD_ISA_BASELINE || isa > hd_isa_supported()) return fail("instruction set not supported by this CPU");
  j.group = group_for(j.k, isa);
  uint64_t n = uint64_t(tpg.x) * tpg.y * tpg.z;
  if (n == 0 || n > kMaxThreadsPerGroup)
    return fail(std::string(j.k->name) + ": threads per threadgroup must be 1..1024");
  j.ngroups = uint64_t(groups.x) * groups.y * groups.z;
  if (j.ngroups == 0) return 0;
  if (j.k->ntg > int(kMaxTG)) return fail(std::string(j.k->name) + ": too many threadgroup arguments");
  j.L = hd_launch{bufs, groups, tpg};
  j.ntg = unsigned(j.k->ntg);
  j.tg_total = 0;
  for (unsigned i = 0; i < j.ntg; i++) {
    j.tg_off[i] = unsigned(j.tg_total);
    j.tg_total += (size_t(tg_len[i]) + kTGAlign - 1) / kTGAlign * kTGAlign;
  }
  pool().run(j);
  if (!j.err.empty()) return fail(j.err);
  return 0;
}

extern "C" void hd_set_workers(int n) { pool().set_workers(n); }
extern "C" int hd_workers(void) { return pool().workers(); }
extern "C" void hd_set_fiber_impl(int ucontext) { g_use_ucontext = ucontext || !kHaveAsm; }
extern "C" const char* hd_fiber_impl(void) { return g_use_ucontext ? "ucontext" : HD_ASM_SWITCH; }
extern "C" unsigned long long hd_physical_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (unsigned long long)pages * (unsigned long long)size : 0;
}
