// szp kernels: compress / decompress for the stream format in format.py.
// Compiled by CuPy (NVRTC) once per (SZP_T, SZP_BDIM, SZP_WIDE, SZP_FORMAT) with --fmad=false
// --ftz=false, so every float operation rounds exactly like NumPy's; the critical ones
// also use the explicit round-to-nearest intrinsics.
//
// Work decomposition: a warp handles 4 blocks of 32 elements per step; lane l belongs to
// block j = l / 8 and holds slot t = l % 8, i.e. 4 consecutive x-elements (one 16-byte
// load for f32, two for f64). Block element e = 4 t + s sits at bit 8 s + t of each
// stream word. Word m of a block is bit plane m of ext = |residual| << 1 | sign (m = 0
// is the sign word; a corner block keeps its corner out of the planes, FORMAT.md: format 3
// stores it byte-packed in the corners section, format 2 its magnitude in one more word).
// Lane t gathers byte g of its 4 ext values into one word, and an
// 8 x 8 bit transpose across the block's 8 lanes (3 shuffles) leaves lane t holding
// stream word 8 g + t: 8 words per 9 instructions after the gather, the reverse for
// decoding. A CTA (8 warps x 4 steps) owns a tile of 128 consecutive blocks.
//
// Compress: persistent CTAs claim tiles in order through an atomic counter. Each warp
// encodes its 16 blocks into its own shared-memory slice, so nothing but one word count
// per warp is live across the CTA barriers. A tile publishes its word count at once; its
// payload offset is resolved by a single-pass decoupled look-back while the CTA is
// already one tile further (double-buffered slices), and the warps then copy their
// slices out with coalesced stores.
// Decompress: the widths are known up front, so a small kernel (szp_width_scan) turns
// them into one word offset per tile first; the decode kernel then needs no barrier,
// no atomics and no look-back.
//
// Instruction diet (the kernels are bound by ALU issue, not by DRAM; the measurements are
// in benchmarks/results/szp_gpu_README.md): 32-bit element indices unless the view has
// 2^31 elements or more (SZP_WIDE), float32 rounding by the 1.5 * 2^23 trick instead of
// FRND + F2I, per-warp offsets from byte-packed block sizes (one warp OR, one multiply)
// instead of shuffles, masked adds as IMAD on the FMA pipe.

#ifndef SZP_T
#define SZP_T float
#endif
#ifndef SZP_BDIM
#define SZP_BDIM 1
#endif
#ifndef SZP_FORMAT
#define SZP_FORMAT 3  // stream format version the kernels write / read (2 also reads 1)
#endif

typedef SZP_T T;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
#if defined(SZP_WIDE)
typedef u64 IDX;  // element coordinates and offsets
#else
typedef u32 IDX;
#endif

#define WARPS 8  // warps per CTA of the decode and width-scan kernels
#ifndef SZP_CWARPS
#define SZP_CWARPS 8  // warps per CTA of szp_compress (gpu.py reads it back from the kernel)
#endif
#define CWARPS SZP_CWARPS
#define CTILE_BLOCKS (CWARPS * STEPS * 4)  // blocks of one compress tile
#define STEPS 4
#define TILE_BLOCKS (WARPS * STEPS * 4)
#define FULL 0xffffffffu
#define QLIMIT 67108864.0
#define MAX_WIDTH 29
#define CORNER_FLAG 0x80u  // width byte: bits 0-4 width, bits 5-6 nb - 1 (format 3), bit 7 corner block
#define CHAIN_FLAG 0x20u   // format 4: bit 5 of a block that is not a corner block: chained
#define WARP_WORDS (STEPS * 4 * (MAX_WIDTH + 1))  // worst-case payload of a warp's 16 blocks
#define FLAG_AGG (1ULL << 62)
#define FLAG_PRE (2ULL << 62)
#define VAL_MASK ((1ULL << 62) - 1)

#if SZP_BDIM == 1
#define BZ 1
#define BY 1
#define BX 32
#define CHAIN_T 7  // format 4: the lane (slot 3) holding element 31, next to the next block's corner
#elif SZP_BDIM == 2
#define BZ 1
#define BY 4
#define BX 8
#define CHAIN_T 1  // element 7: (0, 7)
#else
#define BZ 2
#define BY 4
#define BX 4
#define CHAIN_T 0  // element 3: (0, 0, 3)
#endif

struct Geom {
    IDX Z, Y, X;   // the (Z, Y, X) view of the data
    u32 NBy, NBx;  // blocks along y and x
    u32 nblocks;
    bool vec;      // X % 4 == 0 and the base is 16-byte aligned: 16-byte accesses
};

// Block coordinates (x, y, z in block units). The first block of a lane is found by
// division once; later steps move 4 blocks along x and carry into y and z.
struct BlockPos { u32 bx, by, bz; };

__device__ __forceinline__ BlockPos block_pos(const Geom& g, u32 b) {
    u32 r = b / g.NBx;
    return {b - r * g.NBx, r % g.NBy, r / g.NBy};
}

__device__ __forceinline__ void advance4(const Geom& g, BlockPos& p) {
    p.bx += 4;
    while (p.bx >= g.NBx) {
        p.bx -= g.NBx;
        if (++p.by >= g.NBy) { p.by = 0; p.bz++; }
    }
}

// Element coordinates of lane slot t of a block (z, y, first x).
__device__ __forceinline__ void slot_coords(const BlockPos& p, int t, IDX& z, IDX& y, IDX& x0) {
#if SZP_BDIM == 1
    z = p.bz; y = p.by; x0 = (IDX)p.bx * 32 + 4 * t;
#elif SZP_BDIM == 2
    z = p.bz; y = (IDX)p.by * 4 + (t >> 1); x0 = (IDX)p.bx * 8 + (t & 1) * 4;
#else
    z = (IDX)p.bz * 2 + (t >> 2); y = (IDX)p.by * 4 + (t & 3); x0 = (IDX)p.bx * 4;
#endif
}

// Byte g of each of a0..a3, packed into one word (byte s from a_s); an involution on
// the 4 x 4 byte matrix.
__device__ __forceinline__ u32 gather_byte(u32 a0, u32 a1, u32 a2, u32 a3, int g) {
    const u32 sel = (u32)g | ((u32)(g + 4) << 4);
    return __byte_perm(__byte_perm(a0, a1, sel), __byte_perm(a2, a3, sel), 0x5410);
}

// 8 x 8 bit transpose inside every byte, across the 8 lanes of a block: afterwards bit
// c of byte s in lane t is what bit t of byte s was in lane c. Three exchange stages
// (d = 4, 2, 1); in each, a lane sends the bits its partner t ^ d needs and rotates what
// it receives into place. The masks and rotations depend only on the lane, so they are
// computed once (written out stage by stage: nvcc left a `d >>= 1` loop rolled, with a
// branch and two selects per stage).
struct Transpose {
    u32 send4, send2, send1;  // bits this lane sends in each stage
    u32 rot4, rot2, rot1;     // left rotation of the received bits
};

// Kept in registers: an opaque copy stops ptxas from recomputing each constant (two
// instructions) at every use, which it did in the decode kernel.
__device__ __forceinline__ u32 pinned(u32 v) {
    u32 r;
    asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(v));
    return r;
}

__device__ __forceinline__ Transpose transpose_consts(int t) {
    Transpose c;
    c.send4 = pinned((t & 4) ? 0x0F0F0F0Fu : 0xF0F0F0F0u);
    c.send2 = pinned((t & 2) ? 0x33333333u : 0xCCCCCCCCu);
    c.send1 = pinned((t & 1) ? 0x55555555u : 0xAAAAAAAAu);
    c.rot4 = pinned((t & 4) ? 28u : 4u);
    c.rot2 = pinned((t & 2) ? 30u : 2u);
    c.rot1 = pinned((t & 1) ? 31u : 1u);
    return c;
}

// The partner's whole word is exchanged: rotated, the bits it sends land exactly on this
// lane's send positions and the rest is masked off by the same one LOP3 that merges.
__device__ __forceinline__ u32 transpose8(u32 x, const Transpose& c) {
    u32 y = __shfl_xor_sync(FULL, x, 4);
    x = (x & ~c.send4) | (__funnelshift_l(y, y, c.rot4) & c.send4);
    y = __shfl_xor_sync(FULL, x, 2);
    x = (x & ~c.send2) | (__funnelshift_l(y, y, c.rot2) & c.send2);
    y = __shfl_xor_sync(FULL, x, 1);
    return (x & ~c.send1) | (__funnelshift_l(y, y, c.rot1) & c.send1);
}

// Load 4 consecutive x-elements; out-of-range coordinates are clamped (edge padding).
__device__ __forceinline__ void load4(const T* __restrict__ x, const Geom& g, IDX z, IDX y,
                                      IDX x0, T v[4]) {
    if (g.vec && z < g.Z && y < g.Y && x0 + 3 < g.X) {  // interior: one 16-byte access
        const T* p = x + (z * g.Y + y) * g.X + x0;
#if defined(SZP_F64)
        double2 a = __ldcs(reinterpret_cast<const double2*>(p));
        double2 c = __ldcs(reinterpret_cast<const double2*>(p) + 1);
        v[0] = a.x; v[1] = a.y; v[2] = c.x; v[3] = c.y;
#else
        float4 a = __ldcs(reinterpret_cast<const float4*>(p));
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
#endif
    } else {
        const IDX zc = z < g.Z ? z : g.Z - 1;
        const IDX yc = y < g.Y ? y : g.Y - 1;
        const T* row = x + (zc * g.Y + yc) * g.X;
#pragma unroll
        for (int s = 0; s < 4; s++) {
            const IDX xs = x0 + s < g.X ? x0 + s : g.X - 1;
            v[s] = row[xs];
        }
    }
}

// The reference rule (format.quantize), element by element. Subnormal inputs are
// outliers (told apart by their bits, which no flush-to-zero mode touches), so every
// float operand below is normal or zero.
__device__ __forceinline__ int quantize_ref(T v, T recip, T step, T check, bool& bad) {
#if defined(SZP_F64)
    const u64 mb = (u64)__double_as_longlong(v) & 0x7fffffffffffffffULL;
    const bool sub = mb != 0 && mb < 0x0010000000000000ULL;
    double qf = rint(__dmul_rn(v, recip));
    bool ok = fabs(qf) < QLIMIT && !sub;
    const double qs = ok ? qf : 0.0;  // == (double)q, up to the sign of zero
    int q = (int)qs;
    double xr = __dmul_rn(qs, step);
    ok = ok && (check > 0.0 ? fabs(__dsub_rn(v, xr)) <= check : v == xr);
#else
    const u32 mb = __float_as_uint(v) & 0x7fffffffu;
    const bool sub = mb != 0 && mb < 0x00800000u;
    float qf = rintf(__fmul_rn(v, recip));
    bool ok = fabsf(qf) < (float)QLIMIT && !sub;
    const float qs = ok ? qf : 0.0f;  // == (float)q, up to the sign of zero
    int q = (int)qs;
    float xr = __fmul_rn(qs, step);
    ok = ok && (check > 0.0f ? fabsf(__fsub_rn(v, xr)) <= check : v == xr);
#endif
    bad = !ok;
    return q;
}

// The same rule, cheaper, for the common case. r + 1.5 * 2^p (p = mantissa bits) lands
// in [2^p, 2^(p+1)), where the spacing is 1, so the addition rounds r to an integer half
// to even exactly as rint does, and the integer sits in the low bits of the sum. For
// float32 that holds while |r| < 2^22; other elements (and subnormal ones) report
// fast = false and the caller redoes them with quantize_ref. For float64 it holds for
// |r| < 2^51, beyond every in-range q, so there is no slow case.
template <bool EXACT>
__device__ __forceinline__ int quantize_fast(T v, T recip, T step, T check, bool& bad, bool& fast) {
#if defined(SZP_F64)
    const double M = 6755399441055744.0;  // 1.5 * 2^52
    const u64 mb2 = (u64)__double_as_longlong(v) << 1;
    const bool sub = mb2 - 2 < 0x001ffffffffffffeULL;  // 0 < |v| < smallest normal
    const double r = __dmul_rn(v, recip);
    const double tt = __dadd_rn(r, M);
    const double qf = __dsub_rn(tt, M);
    const bool in = fabs(qf) < QLIMIT && !sub;
    const double qs = in ? qf : 0.0;
    const int q = in ? (int)(u32)__double_as_longlong(tt) : 0;
    const double xr = __dmul_rn(qs, step);
    bad = !(in && (EXACT ? v == xr : fabs(__dsub_rn(v, xr)) <= check));
    fast = true;
    return q;
#else
    const float M = 12582912.0f;  // 1.5 * 2^23
    const bool sub = __float_as_uint(v) * 2u - 2u < 0x00fffffeu;  // 0 < |v| < smallest normal
    const float r = __fmul_rn(v, recip);
    const float tt = __fadd_rn(r, M);
    const float qf = __fsub_rn(tt, M);
    fast = fabsf(r) < 4194304.0f && !sub;  // false for NaN
    const float xr = __fmul_rn(qf, step);
    bad = !(EXACT ? v == xr : fabsf(__fsub_rn(v, xr)) <= check);
    return __float_as_int(tt) - 0x4B400000;
#endif
}

// a + b * m with m in {0, 1, -1}: an IMAD, which runs on the FMA pipe, in place of the
// select and add (both ALU) that a conditional add compiles to. The kernels are bound by
// ALU issue; inline PTX keeps the compiler from folding the multiply back into a select.
__device__ __forceinline__ u32 mad_mask(u32 b, u32 m, u32 a) {
    u32 r;
    asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(b), "r"(m), "r"(a));
    return r;
}

// Lorenzo residuals inside a block; neighbours outside the block count as 0.
__device__ __forceinline__ void lorenzo(int q[4], int t) {
    int prev = __shfl_up_sync(FULL, q[3], 1);
#if SZP_BDIM == 1
    if (t == 0) prev = 0;
#elif SZP_BDIM == 2
    if ((t & 1) == 0) prev = 0;
#else
    prev = 0;
#endif
    int a[4] = {q[0] - prev, q[1] - q[0], q[2] - q[1], q[3] - q[2]};
#pragma unroll
    for (int s = 0; s < 4; s++) q[s] = a[s];
#if SZP_BDIM == 2
    const u32 my = (t >> 1) > 0 ? ~0u : 0u;  // -1 where a neighbour along y is inside the block
#pragma unroll
    for (int s = 0; s < 4; s++) q[s] = (int)mad_mask((u32)__shfl_up_sync(FULL, q[s], 2), my, (u32)q[s]);
#elif SZP_BDIM == 3
    const u32 my = (t & 3) > 0 ? ~0u : 0u, mz = (t >> 2) > 0 ? ~0u : 0u;
#pragma unroll
    for (int s = 0; s < 4; s++) q[s] = (int)mad_mask((u32)__shfl_up_sync(FULL, q[s], 1), my, (u32)q[s]);
#pragma unroll
    for (int s = 0; s < 4; s++) q[s] = (int)mad_mask((u32)__shfl_up_sync(FULL, q[s], 4), mz, (u32)q[s]);
#endif
}

// Inverse Lorenzo: prefix sums along x, y, z inside the block (wrapping u32 arithmetic).
__device__ __forceinline__ void unlorenzo(u32 d[4], int t) {
    d[1] += d[0]; d[2] += d[1]; d[3] += d[2];
#if SZP_BDIM == 1
#pragma unroll
    for (int off = 1; off < 8; off <<= 1) {
        const u32 carry = __shfl_up_sync(FULL, d[3], off);
        const u32 add = mad_mask(carry, t >= off ? 1u : 0u, 0u);
#pragma unroll
        for (int s = 0; s < 4; s++) d[s] += add;
    }
#elif SZP_BDIM == 2
    {
        const u32 carry = __shfl_up_sync(FULL, d[3], 1);
        const u32 add = mad_mask(carry, (t & 1) ? 1u : 0u, 0u);
#pragma unroll
        for (int s = 0; s < 4; s++) d[s] += add;
    }
    const u32 m1 = (t >> 1) >= 1 ? 1u : 0u, m2 = (t >> 1) >= 2 ? 1u : 0u;
#pragma unroll
    for (int s = 0; s < 4; s++) d[s] = mad_mask(__shfl_up_sync(FULL, d[s], 2), m1, d[s]);
#pragma unroll
    for (int s = 0; s < 4; s++) d[s] = mad_mask(__shfl_up_sync(FULL, d[s], 4), m2, d[s]);
#else
    const u32 m1 = (t & 3) >= 1 ? 1u : 0u, m2 = (t & 3) >= 2 ? 1u : 0u, mz = (t >> 2) >= 1 ? 1u : 0u;
#pragma unroll
    for (int s = 0; s < 4; s++) d[s] = mad_mask(__shfl_up_sync(FULL, d[s], 1), m1, d[s]);
#pragma unroll
    for (int s = 0; s < 4; s++) d[s] = mad_mask(__shfl_up_sync(FULL, d[s], 2), m2, d[s]);
#pragma unroll
    for (int s = 0; s < 4; s++) d[s] = mad_mask(__shfl_up_sync(FULL, d[s], 4), mz, d[s]);
#endif
}

// Inclusive prefix sum of v over lanes 0 .. N-1 (N a power of two, at most 32).
template <int N>
__device__ __forceinline__ u32 warp_scan_incl(u32 v, int lane) {
#pragma unroll
    for (int o = 1; o < N; o <<= 1) {
        const u32 n = __shfl_up_sync(FULL, v, o);
        if (lane >= o) v += n;
    }
    return v;
}

// Single-pass decoupled look-back over tiles (tiles of blocks, or tiles of tiles in the
// width scan), claimed in order. A tile first publishes its own total (an aggregate;
// tile 0's is already its inclusive prefix), which never waits; resolving its exclusive
// prefix then walks back over predecessors, 32 per step, adding aggregates until it finds
// an inclusive prefix, and publishes its own. Both are run by one whole warp.
__device__ __forceinline__ void tile_publish(u64* status, u32 tile, u64 total, int lane) {
    if (lane == 0) reinterpret_cast<volatile u64*>(status)[tile] = (tile ? FLAG_AGG : FLAG_PRE) | total;
}

__device__ __forceinline__ u64 tile_resolve(u64* status, u32 tile, u64 total, int lane) {
    volatile u64* vs = status;
    if (tile == 0) return 0;
    u64 excl = 0;
    i64 pred = (i64)tile - 1;
    while (true) {
        i64 idx = pred - lane;
        u64 st = FLAG_PRE;  // before tile 0: a prefix of 0
        if (idx >= 0) {
            do { st = vs[idx]; } while ((st >> 62) == 0);
        }
        u32 pre = __ballot_sync(FULL, (st >> 62) == 2);
        u64 val = st & VAL_MASK;
        if (pre && lane > __ffs(pre) - 1) val = 0;
#pragma unroll
        for (int o = 16; o; o >>= 1) val += __shfl_xor_sync(FULL, val, o);
        excl += val;
        if (pre) break;
        pred -= 32;
    }
    if (lane == 0) vs[tile] = FLAG_PRE | (excl + total);
    return excl;
}

__device__ __forceinline__ u64 tile_lookback(u64* status, u32 tile, u64 total, int lane) {
    tile_publish(status, tile, total, lane);
    return tile_resolve(status, tile, total, lane);
}

// Per-block word counts (0 or width + 1, at most 30) of a step's 4 blocks packed one per
// byte: the byte prefix sums come from one multiply (no byte exceeds 120, so no carries).
__device__ __forceinline__ u32 packed_before(u32 packed, int j) {
    return ((packed * 0x01010100u) >> (8 * j)) & 0xffu;
}
__device__ __forceinline__ u32 packed_total(u32 packed) { return (packed * 0x01010101u) >> 24; }

// One warp's share of a tile (16 blocks, 4 per step): quantise, record outliers, write
// the width bytes, and encode the payload words into the warp's shared-memory slice.
// Returns the slice's length in words (the same in every lane).
template <bool EXACT>
__device__ __forceinline__ u32 compress_warp(
    const T* __restrict__ x, const Geom& g, u32 tile, T recip, T step, T check,
    unsigned char* __restrict__ widths, u32* __restrict__ corner_ext, u64* __restrict__ out_idx,
    T* __restrict__ out_val, u64* out_count, u64 out_cap, u32* __restrict__ slice) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j = lane >> 3, t = lane & 7;
    const Transpose tc = transpose_consts(t);
    const u32 b0 = tile * CTILE_BLOCKS + warp * (STEPS * 4) + j;
    BlockPos pos = block_pos(g, b0 < g.nblocks ? b0 : 0u);
    u32 wrun = 0;  // words of this warp's blocks so far
#pragma unroll
    for (int i = 0; i < STEPS; i++) {
        const u32 b = b0 + 4 * i;
        const bool valid = b < g.nblocks;
        IDX z = 0, y = 0, x0 = 0;
        T v[4] = {0, 0, 0, 0};
        if (valid) {
            slot_coords(pos, t, z, y, x0);
            load4(x, g, z, y, x0, v);
        }
        int q[4];
        bool bad[4], fast[4];
#pragma unroll
        for (int s = 0; s < 4; s++) q[s] = quantize_fast<EXACT>(v[s], recip, step, check, bad[s], fast[s]);
#if !defined(SZP_F64)
        if (__any_sync(FULL, !(fast[0] && fast[1] && fast[2] && fast[3]))) {
#pragma unroll
            for (int s = 0; s < 4; s++)
                if (!fast[s]) q[s] = quantize_ref(v[s], recip, step, check, bad[s]);
        }
#endif
        if (__any_sync(FULL, bad[0] || bad[1] || bad[2] || bad[3])) {
            const bool row_in = valid && z < g.Z && y < g.Y;
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (bad[s] && row_in && x0 + s < g.X) {
                    u64 k = atomicAdd(out_count, 1ULL);
                    if (k < out_cap) {
                        out_idx[k] = (u64)((z * g.Y + y) * g.X + x0 + s);
                        out_val[k] = v[s];
                    }
                }
            }
        }
#if SZP_FORMAT >= 4
        // the quantised value next to this block's corner: block j - 1's element at lane
        // CHAIN_T, slot 3 (block 0 of a step is never chained)
        const int chain_src = __shfl_sync(FULL, q[3], ((j + 3) & 3) * 8 + CHAIN_T);
#endif
        lorenzo(q, t);
        u32 ext[4];
#pragma unroll
        for (int s = 0; s < 4; s++) ext[s] = __funnelshift_l((u32)q[s], (u32)abs(q[s]), 1);
#if SZP_FORMAT >= 3
        // The block corner (element 0) is slot 0 of lane t == 0. mr: the ext bits of the
        // other 31 elements; e0: the corner's ext, in all 8 lanes. The bit length of an
        // OR of ext values is 0 or width + 1: exactly a block's word count.
        u32 mr = (t == 0 ? 0u : ext[0]) | ext[1] | ext[2] | ext[3];
        mr |= __shfl_xor_sync(FULL, mr, 1);
        mr |= __shfl_xor_sync(FULL, mr, 2);
        mr |= __shfl_xor_sync(FULL, mr, 4);
        const u32 e0 = __shfl_sync(FULL, ext[0], lane & ~7);  // the corner's ext, in all 8 lanes
        const u32 nw_plain = 32 - __clz(mr | e0);  // 0, or width + 1
        const u32 nw_rest = 32 - __clz(mr);        // as a corner block: 0, or w_rest + 1
        // The reference's rule 4 nw_rest + nb < 4 nw_plain, nb = max(1, ceil(bitlen(v) / 8))
        // with v = |d0| when the block keeps words (its sign word has the sign), else ext0:
        // only when nw_rest < nw_plain, and then the corner alone sets the width, so
        // bitlen(ext0) = nw_plain (bitlen(|d0|) = nw_plain - 1); with nw_plain - nw_rest == 1
        // that needs nb < 4, i.e. nw_plain <= 25 (nw_rest == 0 then means nw_plain == 1).
        bool corner = valid && nw_rest < nw_plain && (nw_rest + 1 < nw_plain || nw_plain <= 25);
        u32 nw = corner ? nw_rest : (valid ? nw_plain : 0u);
        const u32 nb = (nw_plain + 7 - (nw ? 1u : 0u)) >> 3;  // a corner block's corner bytes
#if SZP_FORMAT >= 4
        // Chained (FORMAT.md): element 0 coded as d0 - s, s the value next to the corner;
        // taken when its words cost fewer bytes than the coding chosen above, never for a
        // step's first block (a multiple of 4: a step's 4 blocks are decoded together).
        const int d0c = (int)((e0 >> 1) * (1u - 2u * (e0 & 1u))) - chain_src;  // d0 from its ext
        const u32 e0c = __funnelshift_l((u32)d0c, (u32)abs(d0c), 1);
        const u32 nw_chain = 32 - __clz(mr | e0c);
        const bool chain = valid && j && 4 * nw_chain < (corner ? 4 * nw_rest + nb : 4 * nw);
        if (chain) {
            corner = false;
            nw = nw_chain;
            if (t == 0) ext[0] = e0c;
        }
#else
        const bool chain = false;
#endif
        const u32 planes = nw;                     // every word is a bit plane
        if (t == 0 && valid) {
            const u32 wbyte = nw ? nw - 1 : 0u;
            widths[b] = corner ? wbyte | ((nb - 1) << 5) | CORNER_FLAG : (chain ? wbyte | CHAIN_FLAG : wbyte);
            if (corner) corner_ext[b] = nw ? ext[0] >> 1 : ext[0];  // szp_corner_pack packs it
        }
        if (corner && t == 0) ext[0] &= 1u;        // the magnitude leaves the planes, the sign stays
#else
        // The block corner (element 0) is slot 0 of lane t == 0. mr: every ext bit of the
        // block but the corner's magnitude; m0: the corner's magnitude, in all 8 lanes.
        u32 mr = (t == 0 ? (ext[0] & 1u) : ext[0]) | ext[1] | ext[2] | ext[3];
        mr |= __shfl_xor_sync(FULL, mr, 1);
        mr |= __shfl_xor_sync(FULL, mr, 2);
        mr |= __shfl_xor_sync(FULL, mr, 4);
        const u32 m0 = __shfl_sync(FULL, ext[0] >> 1, lane & ~7);
        const u32 nw_plain = 32 - __clz(mr | (m0 << 1));  // 0, or width + 1
        const u32 w_rest = mr ? 31 - __clz(mr) : 0u;      // width of the other 31
        const bool corner = valid && w_rest + 2 < nw_plain;  // fewer words as a corner block
        const u32 nw = corner ? w_rest + 2 : (valid ? nw_plain : 0u);
        const u32 planes = corner ? w_rest + 1 : nw;      // words that are bit planes
        if (corner && t == 0) ext[0] &= 1u;                // the corner's magnitude leaves them
        if (t == 0 && valid) widths[b] = corner ? (w_rest | CORNER_FLAG) : (nw ? nw - 1 : 0u);
#endif
        const u32 packed = __reduce_or_sync(FULL, t == 0 ? nw << (8 * j) : 0u);
        u32* const blk = slice + wrun + packed_before(packed, j);
        const u32 maxn = __reduce_max_sync(FULL, planes);
        // 8 words per transpose; lane t writes word 8 gi + t of its block
#pragma unroll
        for (int gi = 0; gi < 4; gi++) {
            if ((u32)(8 * gi) >= maxn) break;
            u32 word = gather_byte(ext[0], ext[1], ext[2], ext[3], gi);
            word = transpose8(word, tc);
            const u32 mi = 8 * gi + t;
            if (mi < planes) blk[mi] = word;
        }
#if SZP_FORMAT < 3
        if (corner && t == 0) blk[planes] = m0;  // the corner block's last word
#endif
        wrun += packed_total(packed);
        advance4(g, pos);
    }
    return wrun;
}

// Shared state of the compress pipeline, double-buffered by tile parity.
struct CompressShared {
    u32 words[2][CWARPS][WARP_WORDS];  // each warp's encoded words, per buffer
    u32 wcount[2][CWARPS];             // each warp's word count
    u32 woff[2][CWARPS];               // each warp's first word inside the tile
    u32 total[2];                     // the tile's word count
    u32 tile[2];                      // the tile each buffer holds
    u64 base[2];                      // the tile's first payload word
};

// Compress pipeline of one persistent CTA: compute tile k into buffer k % 2 and publish
// its total (never waits); then resolve the look-back of tile k - 1, published one tile's
// work earlier so that its predecessors are mostly done, and copy tile k - 1 out of the
// other buffer. Each warp writes and copies only its own slice, so the two CTA barriers
// per tile are the only synchronisation.
template <bool EXACT>
__device__ __forceinline__ void compress_tiles(
    const T* __restrict__ x, const Geom& g, u32 ntiles, T recip, T step, T check,
    unsigned char* __restrict__ widths, u32* __restrict__ corner_ext, u32* __restrict__ payload,
    u64* status, u32* tile_counter, u64* __restrict__ out_idx, T* __restrict__ out_val,
    u64* out_count, u64 out_cap, CompressShared& sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // per-tile state lives in shared memory (registers are the limit here)
    for (int buf = 0, prev = -1;; prev = buf, buf ^= 1) {
        const u32 tile = sh.tile[buf];
        const bool have = tile < ntiles;
        if (have) {
            const u32 wrun = compress_warp<EXACT>(x, g, tile, recip, step, check, widths, corner_ext,
                                                  out_idx, out_val, out_count, out_cap, sh.words[buf][warp]);
            if (lane == 0) sh.wcount[buf][warp] = wrun;
        }
        __syncthreads();
        if (warp == 0) {
            if (have) {
                const u32 wv = lane < CWARPS ? sh.wcount[buf][lane] : 0u;
                const u32 incl = warp_scan_incl<CWARPS>(wv, lane);
                const u32 total = __shfl_sync(FULL, incl, CWARPS - 1);
                tile_publish(status, tile, total, lane);
                if (lane < CWARPS) sh.woff[buf][lane] = incl - wv;
                if (lane == 0) sh.total[buf] = total;
            }
            if (prev >= 0) {
                const u64 base = tile_resolve(status, sh.tile[prev], sh.total[prev], lane);
                if (lane == 0) sh.base[prev] = base;
            }
            __syncwarp();
            if (have && lane == 0) sh.tile[buf ^ 1] = atomicAdd(tile_counter, 1u);  // the next tile
        }
        __syncthreads();
        if (prev >= 0) {
            u32* const dst = payload + (sh.base[prev] + sh.woff[prev][warp]);
            const u32* const src = sh.words[prev][warp];
            const u32 n = sh.wcount[prev][warp];
            for (u32 k = lane; k < n; k += 32) dst[k] = src[k];
        }
        if (!have) break;
    }
}

// At most 40 registers: 48 resident warps per SM (6 CTAs of 8 warps); the grid is
// persistent (gpu.py launches that many CTAs per SM; keep the two in step). A 32-register
// cap spilled in CuPy's NVRTC build; the 64-bit index build needs 48 registers (40 warps),
// and so does format 4's chain step (with 40, NVRTC 13.0 spilled 8-16 bytes for float32 and
// nvcc 4-8 for float64).
#if defined(SZP_WIDE) || SZP_FORMAT >= 4
#define COMPRESS_MIN_CTAS (40 / CWARPS)
#else
#define COMPRESS_MIN_CTAS (48 / CWARPS)
#endif
extern "C" __global__ void __launch_bounds__(CWARPS * 32, COMPRESS_MIN_CTAS)
szp_compress(const T* __restrict__ x, IDX Z, IDX Y, IDX X, u32 NBy, u32 NBx, u32 nblocks, int vec,
             T recip, T step, T check, unsigned char* __restrict__ widths, u32* __restrict__ corner_ext,
             u32* __restrict__ payload, u64* status, u32* tile_counter, u64* __restrict__ out_idx,
             T* __restrict__ out_val, u64* out_count, u64 out_cap) {
    __shared__ CompressShared sh;
    const Geom g = {Z, Y, X, NBy, NBx, nblocks, vec != 0};
    const u32 ntiles = (nblocks + CTILE_BLOCKS - 1) / CTILE_BLOCKS;
    if (threadIdx.x == 0) sh.tile[0] = atomicAdd(tile_counter, 1u);
    __syncthreads();
    if (check > (T)0)
        compress_tiles<false>(x, g, ntiles, recip, step, check, widths, corner_ext, payload, status,
                              tile_counter, out_idx, out_val, out_count, out_cap, sh);
    else  // a zero check bound: only exact reconstructions pass
        compress_tiles<true>(x, g, ntiles, recip, step, check, widths, corner_ext, payload, status,
                             tile_counter, out_idx, out_val, out_count, out_cap, sh);
}

// Word counts of 4 blocks from their 4 width bytes, still one per byte: 0 for width 0,
// else w + 1 (format 2: a corner block has w + 2, even for w == 0). A byte with a width above
// MAX_WIDTH or with bits 5-6 set where the format has none (only in a corrupt stream)
// counts as 0 words; *bad says so.
__device__ __forceinline__ u32 word_counts4(u32 w4, bool* bad) {
    const u32 w = w4 & 0x1f1f1f1fu;
    const u32 big = (w + (0x80808080u - 0x1e1e1e1eu)) & 0x80808080u;  // width >= 30
    const u32 bits56 = ((w4 & 0x60606060u) + 0x7f7f7f7fu) & 0x80808080u;  // bits 5-6 set
#if SZP_FORMAT >= 4
    const u32 junk = (w4 << 1) & ~w4 & 0x80808080u;  // bit 6 on a block that is not a corner block
    const u32 any = ((w + 0x7f7f7f7fu) & 0x80808080u) >> 7;  // the block has words
    const u32 extra = 0u;
    (void)bits56;
#elif SZP_FORMAT >= 3
    const u32 junk = bits56 & ~w4;  // a corner's byte count on a plain block
    const u32 any = ((w + 0x7f7f7f7fu) & 0x80808080u) >> 7;  // the block has words
    const u32 extra = 0u;
#else
    const u32 junk = bits56;
    const u32 corner = (w4 >> 7) & 0x01010101u;
    const u32 any = (((w + 0x7f7f7f7fu) & 0x80808080u) >> 7) | corner;
    const u32 extra = corner;  // the corner's magnitude word
#endif
    const u32 invalid = (big | junk) >> 7;
    *bad = invalid != 0;
    return (w + any + extra) & ((invalid ^ 0x01010101u) * 0xffu);
}

// The 4 width bytes of blocks b .. b + 3 (b a multiple of 4); bytes past nblocks are 0.
__device__ __forceinline__ u32 widths4(const unsigned char* __restrict__ widths, u32 b, u32 nblocks) {
    if (b + 3 < nblocks) return __ldg(reinterpret_cast<const u32*>(widths + b));
    u32 w4 = 0;
    for (u32 k = 0; b + k < nblocks && k < 4; k++) w4 |= (u32)widths[b + k] << (8 * k);
    return w4;
}

#define SCAN_LANE_BLOCKS 16                                    // widths one lane reads
#define SCAN_WARP_TILES (32 * SCAN_LANE_BLOCKS / TILE_BLOCKS)  // 4 tiles per warp
#define SCAN_CTA_TILES (WARPS * SCAN_WARP_TILES)               // 32 tiles per CTA

// Corner-section bytes of 4 blocks from their 4 width bytes (format 3), one per byte: nb
// for a corner block (bits 5-6 + 1), else 0.
__device__ __forceinline__ u32 corner_counts4(u32 w4) {
    const u32 corner = (w4 >> 7) & 0x01010101u;
    return (((w4 >> 5) & 0x03030303u) + 0x01010101u) & (corner * 0xffu);
}

// tile_prefix[tile] = first payload word (CORNERS: first corner byte) of each tile,
// tile_prefix[ntiles] = the total, also written to *total_out when that is given.
// A lane reads 16 widths with one 16-byte load, a warp covers 4 tiles, and a CTA scans
// its 32 tiles and looks back over CTAs (claimed in order through cta_counter). Launch
// ntiles / 32 + 1 CTAs, so that some lane owns slot ntiles.
template <bool CORNERS>
__device__ __forceinline__ void width_scan(const unsigned char* __restrict__ widths, u32 nblocks, u32 ntiles,
                                           u64* __restrict__ tile_prefix, u64* status, u32* cta_counter,
                                           u32* error, u64* total_out) {
    __shared__ u32 s_cta;
    __shared__ u32 s_tot[WARPS];
    __shared__ u64 s_base;
    if (threadIdx.x == 0) s_cta = atomicAdd(cta_counter, 1u);
    __syncthreads();
    const u32 cta = s_cta;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 tile0 = cta * SCAN_CTA_TILES + warp * SCAN_WARP_TILES;  // the warp's first tile
    const u64 b = (u64)tile0 * TILE_BLOCKS + lane * SCAN_LANE_BLOCKS;
    u32 w[4] = {0u, 0u, 0u, 0u};
    if (b + SCAN_LANE_BLOCKS <= nblocks) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(widths + b));
        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
    } else if (b < nblocks) {
#pragma unroll
        for (int k = 0; k < 4; k++) w[k] = widths4(widths, (u32)b + 4 * k, nblocks);
    }
    bool bad = false;
    u32 sum = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (CORNERS) {
            sum += packed_total(corner_counts4(w[k]));
        } else {
            bool bk;
            sum += packed_total(word_counts4(w[k], &bk));
            bad = bad || bk;
        }
    }
    if (!CORNERS && __any_sync(FULL, bad) && lane == 0) atomicOr(error, 1u);
    const u32 incl = warp_scan_incl<32>(sum, lane);
    if (lane == 31) s_tot[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const u32 v = lane < WARPS ? s_tot[lane] : 0u;
        const u32 wincl = warp_scan_incl<WARPS>(v, lane);
        const u32 total = __shfl_sync(FULL, wincl, WARPS - 1);
        const u64 excl = tile_lookback(status, cta, total, lane);
        if (lane < WARPS) s_tot[lane] = wincl - v;  // each warp's offset inside the CTA
        if (lane == 0) s_base = excl;
    }
    __syncthreads();
    const u32 tile = tile0 + lane / (TILE_BLOCKS / SCAN_LANE_BLOCKS);
    if (lane % (TILE_BLOCKS / SCAN_LANE_BLOCKS) == 0 && tile <= ntiles) {
        const u64 v = s_base + s_tot[warp] + (incl - sum);
        tile_prefix[tile] = v;
        if (tile == ntiles && total_out) *total_out = v;
    }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
szp_width_scan(const unsigned char* __restrict__ widths, u32 nblocks, u32 ntiles,
               u64* __restrict__ tile_prefix, u64* status, u32* cta_counter, u32* error) {
    width_scan<false>(widths, nblocks, ntiles, tile_prefix, status, cta_counter, error, nullptr);
}

// The same scan over the corners' byte counts (format 3); the total also lands in *total.
extern "C" __global__ void __launch_bounds__(WARPS * 32)
szp_corner_scan(const unsigned char* __restrict__ widths, u32 nblocks, u32 ntiles,
                u64* __restrict__ tile_prefix, u64* status, u32* cta_counter, u64* total) {
    width_scan<true>(widths, nblocks, ntiles, tile_prefix, status, cta_counter, nullptr, total);
}

// float32 with 32-bit indices fits 32 registers: 8 CTAs per SM (full occupancy); float64
// or 64-bit indices need 40 (6 CTAs), both 48 (5 CTAs), to stay free of spills
// (nvcc -Xptxas -v).
// Format 4's chain step needs one more register class: float32 40 (6 CTAs), float32 with
// 64-bit indices 48 (5 CTAs); float64 fits as before.
#ifndef SZP_DEC_MIN_CTAS
#if defined(SZP_F64) && defined(SZP_WIDE)
#define SZP_DEC_MIN_CTAS 5  // 48 registers
#elif defined(SZP_WIDE) && SZP_FORMAT >= 4
#define SZP_DEC_MIN_CTAS 5
#elif defined(SZP_F64) || defined(SZP_WIDE) || SZP_FORMAT >= 4
#define SZP_DEC_MIN_CTAS 6
#else
#define SZP_DEC_MIN_CTAS 8
#endif
#endif
extern "C" __global__ void __launch_bounds__(WARPS * 32, SZP_DEC_MIN_CTAS)
szp_decompress(T* __restrict__ y_out, IDX Z, IDX Y, IDX X, u32 NBy, u32 NBx, u32 nblocks, int vec,
               T step, const unsigned char* __restrict__ widths, const u32* __restrict__ payload,
               const u64* __restrict__ tile_prefix, u64 payload_words,
               const u32* __restrict__ corner_ext) {
    __shared__ T s_stage[WARPS][4 * 32];  // one step of one warp: BZ * BY rows of 4 * BX
    const Geom g = {Z, Y, X, NBy, NBx, nblocks, vec != 0};
    const u32 tile = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j = lane >> 3, t = lane & 7;
    const u32 b0 = tile * TILE_BLOCKS + warp * (STEPS * 4) + j;
    // this warp's first word: the tile's prefix plus the blocks of the warps before it.
    // Lane l holds the word counts of the tile's blocks 4 l .. 4 l + 3, so a warp's 4 STEPS
    // blocks sit in lanes STEPS warp .. STEPS warp + STEPS - 1, one lane per step.
    bool bad;
    const u32 raw4 = widths4(widths, tile * TILE_BLOCKS + 4 * lane, nblocks);
    const u32 n4 = word_counts4(raw4, &bad);
    u64 wbase = tile_prefix[tile] +
                __reduce_add_sync(FULL, lane < warp * STEPS ? packed_total(n4) : 0u);

    BlockPos pos = block_pos(g, b0 < nblocks ? b0 : 0u);
    const Transpose tc = transpose_consts(t);
#pragma unroll
    for (int i = 0; i < STEPS; i++) {
        const u32 b = b0 + 4 * i;
        const u32 packed = __shfl_sync(FULL, n4, warp * STEPS + i);
        const u32 raw = __shfl_sync(FULL, raw4, warp * STEPS + i);
        const u64 boff = wbase + packed_before(packed, j);
        u32 nw = (packed >> (8 * j)) & 0xffu;
        if (boff + nw > payload_words) nw = 0;  // corrupt stream: never read past the payload
#if SZP_FORMAT >= 3
        // a corner block's corner comes from szp_corner_unpack (b < nblocks: widths4 reads
        // 0 past the end); a corner-only block has no words at all
        const bool corner = (raw >> (8 * j)) & CORNER_FLAG;
        const u32 planes = nw;
#else
        const bool corner = ((raw >> (8 * j)) & CORNER_FLAG) && nw;
        const u32 planes = corner ? nw - 1 : nw;  // a corner block's last word is not a plane
#endif
        const u32 maxn = __reduce_max_sync(FULL, planes);
        const u32* blk = payload + boff;
        // all loads first (one memory round trip per step), then the transposes
        u32 G[4];
#pragma unroll
        for (int gi = 0; gi < 4; gi++) {
            const u32 mi = 8 * gi + t;
            G[gi] = mi < planes ? __ldg(blk + mi) : 0u;
        }
#if SZP_FORMAT >= 3
        const u32 e0 = corner && t == 0 ? __ldg(corner_ext + b) : 0u;  // the corner's value
#else
        const u32 m0 = corner && t == 0 ? __ldg(blk + planes) : 0u;  // the corner's magnitude
#endif
#pragma unroll
        for (int gi = 0; gi < 4; gi++)
            if ((u32)(8 * gi) < maxn) G[gi] = transpose8(G[gi], tc);
        u32 d[4];
#pragma unroll
        for (int s = 0; s < 4; s++) {
            u32 e = gather_byte(G[0], G[1], G[2], G[3], s);
#if SZP_FORMAT >= 3
            // the corner: its magnitude (sign from the sign word), or ext0 without words
            if (s == 0 && corner && t == 0) e = nw ? (e0 << 1) | (e & 1u) : e0;
#else
            if (s == 0) e |= m0 << 1;
#endif
            d[s] = (e >> 1) * (1u - 2u * (e & 1u));  // sign-magnitude to two's complement
        }
        unlorenzo(d, t);
#if SZP_FORMAT >= 4
        // Chained blocks (bit 5 without bits 6-7): add the final value of the block before
        // at its CHAIN_T lane's slot 3, in block order (f_k = v_k + (chained_k ? f_(k-1) : 0)).
        // raw is the same in every lane, so the branch is warp-uniform.
        const u32 cbits = ~raw & (raw << 2) & ~(raw << 1) & 0x80808080u;  // bit 5 set, 6 and 7 clear
        if (cbits) {
            // block 0 of a step is never chained; one block at a time keeps few values live
            // (the float32 decoder has 32 registers)
            u32 f = __shfl_sync(FULL, d[3], CHAIN_T), off = 0u;
#pragma unroll
            for (int k = 1; k < 4; k++) {
                const u32 v = __shfl_sync(FULL, d[3], 8 * k + CHAIN_T);
                const bool ck = (cbits >> (8 * k + 7)) & 1u;
                if (k == j && ck) off = f;
                f = ck ? v + f : v;
            }
#pragma unroll
            for (int s = 0; s < 4; s++) d[s] += off;
        }
#endif
        wbase += packed_total(packed);
        T v[4];
#pragma unroll
        for (int s = 0; s < 4; s++) {
#if defined(SZP_F64)
            v[s] = __dmul_rn((double)(int)d[s], step);
#else
            v[s] = __fmul_rn(__int2float_rn((int)d[s]), step);
#endif
        }
        IDX z, y, x0;
        slot_coords(pos, t, z, y, x0);
        // Rows that are not 16-byte aligned: 4-byte stores from lanes 16 bytes apart would
        // touch 4x the sectors, so the step's 4 blocks (consecutive along x unless they wrap
        // to the next block row) go through shared memory, and consecutive lanes then
        // store consecutive elements of each row segment.
        const u32 bx_first = __shfl_sync(FULL, pos.bx, 0);
        if (!g.vec && bx_first + 3 < g.NBx && __shfl_sync(FULL, b, 0) + 3 < g.nblocks) {
            T* const st = s_stage[warp];
            const int srow = (t * 4) / BX, scol = j * BX + (t * 4) % BX;  // slot t in the staging rows
#pragma unroll
            for (int s = 0; s < 4; s++) st[srow * (4 * BX) + scol + s] = v[s];
            __syncwarp();
            const IDX zb = (IDX)__shfl_sync(FULL, pos.bz, 0) * BZ, yb = (IDX)__shfl_sync(FULL, pos.by, 0) * BY;
            const IDX xb = (IDX)bx_first * BX;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int e = lane + 32 * k, row = e / (4 * BX), col = e % (4 * BX);
                const IDX ze = zb + row / BY, ye = yb + row % BY, xe = xb + col;
                if (ze < g.Z && ye < g.Y && xe < g.X) y_out[(ze * g.Y + ye) * g.X + xe] = st[e];
            }
            __syncwarp();
        } else if (b < g.nblocks && z < g.Z && y < g.Y) {
            T* p = y_out + (z * g.Y + y) * g.X + x0;
            if (g.vec && x0 + 3 < g.X) {
#if defined(SZP_F64)
                __stcs(reinterpret_cast<double2*>(p), make_double2(v[0], v[1]));
                __stcs(reinterpret_cast<double2*>(p) + 1, make_double2(v[2], v[3]));
#else
                __stcs(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
#endif
            } else {
#pragma unroll
                for (int s = 0; s < 4; s++)
                    if (x0 + s < g.X) p[s] = v[s];
            }
        }
        advance4(g, pos);
    }
}

// Format 3 corners section: one warp per tile of TILE_BLOCKS blocks, lane l for its blocks
// 4 l .. 4 l + 3; a corner's first byte is its tile's prefix (szp_corner_scan) plus the
// corner bytes of the blocks before it in the tile (a warp scan of per-lane totals, then
// the byte-packed counts' own prefix). Launch ntiles / WARPS + 1 CTAs of WARPS warps.

// Byte-pack each corner block's corner value (written by szp_compress into corner_ext) into `out`.
extern "C" __global__ void __launch_bounds__(WARPS * 32)
szp_corner_pack(const unsigned char* __restrict__ widths, u32 nblocks, u32 ntiles,
                const u32* __restrict__ corner_ext, const u64* __restrict__ tile_prefix,
                unsigned char* __restrict__ out) {
    const int lane = threadIdx.x & 31;
    const u32 tile = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (tile >= ntiles) return;  // whole warps
    const u32 b = tile * TILE_BLOCKS + 4 * lane;
    const u32 c4 = corner_counts4(widths4(widths, b, nblocks));
    const u32 tot = packed_total(c4);
    const u64 off = tile_prefix[tile] + (warp_scan_incl<32>(tot, lane) - tot);
    if (!tot) return;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const u32 nb = (c4 >> (8 * k)) & 0xffu;
        if (!nb) continue;
        const u32 e = corner_ext[b + k];
        unsigned char* const p = out + off + packed_before(c4, k);
        for (u32 i = 0; i < nb; i++) p[i] = (unsigned char)(e >> (8 * i));
    }
}

// The reverse: each corner block's corner value into corner_ext. A corner past the section's `len`
// bytes or not in its fewest bytes sets bit 1 of *error (a corrupt stream; the host also
// checks the scan's total against the header), with one atomic per warp at most.
extern "C" __global__ void __launch_bounds__(WARPS * 32)
szp_corner_unpack(const unsigned char* __restrict__ widths, u32 nblocks, u32 ntiles,
                  const unsigned char* __restrict__ corners, u64 len,
                  const u64* __restrict__ tile_prefix, u32* __restrict__ corner_ext, u32* error) {
    const int lane = threadIdx.x & 31;
    const u32 tile = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (tile >= ntiles) return;  // whole warps
    const u32 b = tile * TILE_BLOCKS + 4 * lane;
    const u32 c4 = corner_counts4(widths4(widths, b, nblocks));
    const u32 tot = packed_total(c4);
    const u64 off = tile_prefix[tile] + (warp_scan_incl<32>(tot, lane) - tot);
    bool bad = false;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const u32 nb = (c4 >> (8 * k)) & 0xffu;
        if (!nb) continue;
        const u64 at = off + packed_before(c4, k);
        u32 e = 0;
        if (at + nb > len) {
            bad = true;
        } else {
            for (u32 i = 0; i < nb; i++) e |= (u32)corners[at + i] << (8 * i);
            bad = bad || (nb > 1 && (e >> (8 * (nb - 1))) == 0);
        }
        corner_ext[b + k] = e;
    }
    if (__any_sync(FULL, bad) && lane == 0) atomicOr(error, 2u);
}

// Outliers: put the exact values back after the main decode.
extern "C" __global__ void szp_scatter(T* __restrict__ y_out, const u64* __restrict__ idx,
                                       const T* __restrict__ val, u64 n_out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_out && idx[i] < n) y_out[idx[i]] = val[i];
}

// Min / max over finite values (rel bounds): order-preserving integer keys + atomics.
#if defined(SZP_F64)
typedef u64 KEY;
__device__ __forceinline__ KEY to_key(double v) {
    u64 u = (u64)__double_as_longlong(v);
    return (u >> 63) ? ~u : (u | (1ULL << 63));
}
#else
typedef u32 KEY;
__device__ __forceinline__ KEY to_key(float v) {
    u32 u = __float_as_uint(v);
    return (u >> 31) ? ~u : (u | 0x80000000u);
}
#endif

// Elements 4 i .. 4 i + 3 of a 16-byte aligned x, streamed (read once).
__device__ __forceinline__ void minmax_load4(const T* __restrict__ x, u64 i, T v[4]) {
#if defined(SZP_F64)
    double2 a = __ldcs(reinterpret_cast<const double2*>(x) + 2 * i);
    double2 c = __ldcs(reinterpret_cast<const double2*>(x) + 2 * i + 1);
    v[0] = a.x; v[1] = a.y; v[2] = c.x; v[3] = c.y;
#else
    float4 a = __ldcs(reinterpret_cast<const float4*>(x) + i);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
#endif
}

__device__ __forceinline__ void minmax_take(const T v[4], KEY& lo, KEY& hi) {
#pragma unroll
    for (int s = 0; s < 4; s++) {
        if (isfinite(v[s])) {
            KEY k = to_key(v[s]);
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
        }
    }
}

extern "C" __global__ void szp_minmax(const T* __restrict__ x, u64 n, KEY* keys) {
    KEY lo = (KEY)~(KEY)0, hi = 0;
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 nth = (u64)gridDim.x * blockDim.x;
    const bool vec = (((unsigned long long)x) & 15) == 0;
    const u64 nvec = vec ? n / 4 : 0;
    u64 i = tid;
    // two independent loads in flight per thread (one left the range pass at ~3 TB/s on
    // the H200, under what a read-only pass can reach); min/max do not care about order
    for (; i + nth < nvec; i += 2 * nth) {
        T v[4], w[4];
        minmax_load4(x, i, v);
        minmax_load4(x, i + nth, w);
        minmax_take(v, lo, hi);
        minmax_take(w, lo, hi);
    }
    if (i < nvec) {
        T v[4];
        minmax_load4(x, i, v);
        minmax_take(v, lo, hi);
    }
    for (u64 i = 4 * nvec + tid; i < n; i += nth) {
        T v = x[i];
        if (isfinite(v)) {
            KEY k = to_key(v);
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
        }
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        KEY a = __shfl_xor_sync(FULL, lo, o), c = __shfl_xor_sync(FULL, hi, o);
        lo = a < lo ? a : lo;
        hi = c > hi ? c : hi;
    }
    if ((threadIdx.x & 31) == 0) {
        atomicMin(keys, lo);
        atomicMax(keys + 1, hi);
    }
}

// -- finishing a compressed stream on the device ---------------------------------------------
// compress_device queues these after szp_compress and the corner scan, before its one wait,
// so that nothing is left to queue once the host has read the counts (each step queued
// after the wait kept the GPU idle while the host worked: ~0.1 ms per call, ~0.4 ms when
// the outliers were sorted by CuPy). Both read the counts the compress kernel left in its
// scratch (`tail` = the last tile's status word: [payload words | flags, tile counter,
// outlier count, corner bytes]) and derive the layout the way format.layout does.

#define SZP_SORT_THREADS 1024

__device__ __forceinline__ u64 pad16(u64 n) { return (n + 15) & ~(u64)15; }

// The header's three counts (its other fields were uploaded before the kernels ran), the
// payload's pad, the packed corners (from their staging room) moved to their section, and
// the corners' pad: bytes [payload end, out_index) of `body`. Nothing when the outliers
// overflowed their room (the host compresses again with room for all of them).
extern "C" __global__ void szp_finish(unsigned char* __restrict__ body, u64 payload_off,
                                      const u64* __restrict__ tail,
                                      const unsigned char* __restrict__ corner_tmp, u64 cap, int v3) {
    const u64 pw = tail[0] & VAL_MASK;
    const u64 n = tail[2];
    const u64 cb = v3 ? tail[3] : 0;
    if (n > cap) return;
    const u64 pay_end = payload_off + 4 * pw;
    const u64 corners = payload_off + pad16(4 * pw);
    const u64 out_index = corners + pad16(cb);
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 nth = (u64)gridDim.x * blockDim.x;
    if (tid == 0) {
        *reinterpret_cast<u64*>(body + 56) = pw;
        *reinterpret_cast<u64*>(body + 64) = n;
        if (v3) *reinterpret_cast<u64*>(body + 128) = cb;
    }
    for (u64 i = pay_end + tid; i < out_index; i += nth)
        body[i] = (i >= corners && i < corners + cb) ? corner_tmp[i - corners] : (unsigned char)0;
}

// The outlier sections in increasing index order, pads zeroed: one CTA sorts (index,
// position) pairs in shared memory (bitonic; the indices are distinct), then writes the
// indices and gathers the values. Launched with SZP_SORT_THREADS threads and `sort_max`
// * 12 bytes of dynamic shared memory (sort_max a power of two); more outliers than
// `sort_max` (or than their room) are left to the host, which sorts them on the device.
extern "C" __global__ void __launch_bounds__(SZP_SORT_THREADS)
szp_sort_outliers(unsigned char* __restrict__ body, u64 payload_off, const u64* __restrict__ tail,
                  const u64* __restrict__ idx, const T* __restrict__ val, u64 cap, u32 sort_max, int v3) {
    extern __shared__ u64 keys[];  // sort_max keys, then sort_max u32 positions
    u32* const pos = reinterpret_cast<u32*>(keys + sort_max);
    const u64 n = tail[2];
    if (n > cap || n > sort_max) return;
    const u64 cb = v3 ? tail[3] : 0;
    const u64 out_index = payload_off + pad16(4 * (tail[0] & VAL_MASK)) + pad16(cb);
    const u64 out_value = out_index + pad16(8 * n);
    const u64 crc = out_value + pad16(sizeof(T) * n);
    const u32 m = (u32)n;
    u32 p2 = 1;
    while (p2 < m) p2 <<= 1;
    for (u32 i = threadIdx.x; i < p2; i += blockDim.x) {
        keys[i] = i < m ? idx[i] : ~0ULL;
        pos[i] = i;
    }
    __syncthreads();
    for (u32 k = 2; k <= p2; k <<= 1) {
        for (u32 j = k >> 1; j > 0; j >>= 1) {
            for (u32 i = threadIdx.x; i < p2; i += blockDim.x) {
                const u32 l = i ^ j;
                if (l > i) {
                    const u64 a = keys[i], b = keys[l];
                    if ((a > b) == ((i & k) == 0)) {
                        keys[i] = b;
                        keys[l] = a;
                        const u32 t = pos[i];
                        pos[i] = pos[l];
                        pos[l] = t;
                    }
                }
            }
            __syncthreads();
        }
    }
    u64* const oi = reinterpret_cast<u64*>(body + out_index);
    T* const ov = reinterpret_cast<T*>(body + out_value);
    for (u32 i = threadIdx.x; i < m; i += blockDim.x) {
        oi[i] = keys[i];
        ov[i] = val[pos[i]];
    }
    for (u64 i = out_index + 8 * n + threadIdx.x; i < out_value; i += blockDim.x) body[i] = 0;
    for (u64 i = out_value + sizeof(T) * n + threadIdx.x; i < crc; i += blockDim.x) body[i] = 0;
}

// The automatic shape choice's two samples of x in one launch (autoshape: the superblocks
// and the 1-D runs that hold them), at precomputed flat indices (IDX: 32-bit unless the
// view has 2^31 elements or more).
extern "C" __global__ void szp_gather2(const T* __restrict__ x, const IDX* __restrict__ ia, T* __restrict__ a,
                                       u64 na, const IDX* __restrict__ ib, T* __restrict__ b, u64 nb) {
    const u64 nth = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < na + nb; i += nth) {
        if (i < na)
            a[i] = x[ia[i]];
        else
            b[i - na] = x[ib[i - na]];
    }
}
