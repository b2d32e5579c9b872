// szp kernels: fused compress / decompress for the stream format in format.py.
// Compiled by CuPy (NVRTC) once per (SZP_T, SZP_BDIM) with --fmad=false --ftz=false, so
// every float operation rounds exactly like NumPy's; the critical ones also use the
// explicit round-to-nearest intrinsics.
//
// Work decomposition: a warp handles 4 blocks of 32 elements per step; lane l belongs to
// block j = l / 8 and holds slot t = l % 8, i.e. 4 consecutive x-elements (one 16-byte
// load for f32, two for f64). Block element e = 4 t + s sits at bit 8 s + t of each
// stream word. Word m of a block is bit plane m of ext = |residual| << 1 | sign (m = 0
// is the sign word). Lane t gathers byte g of its 4 ext values into one word, and an
// 8 x 8 bit transpose across the block's 8 lanes (3 shuffles) leaves lane t holding
// stream word 8 g + t: 8 words per 12 instructions, the reverse for decoding.
// A CTA (8 warps x 4 steps) owns a tile of 128 consecutive blocks; tiles are claimed in
// order through an atomic counter, and their payload offsets come from a single-pass
// decoupled look-back over per-tile status words.

#ifndef SZP_T
#define SZP_T float
#endif
#ifndef SZP_BDIM
#define SZP_BDIM 1
#endif

typedef SZP_T T;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define WARPS 8
#define STEPS 4
#define TILE_BLOCKS (WARPS * STEPS * 4)
#define FULL 0xffffffffu
#define QLIMIT 67108864.0
#define MAX_WIDTH 29
#define FLAG_AGG (1ULL << 62)
#define FLAG_PRE (2ULL << 62)
#define VAL_MASK ((1ULL << 62) - 1)

#if SZP_BDIM == 1
#define BZ 1
#define BY 1
#define BX 32
#elif SZP_BDIM == 2
#define BZ 1
#define BY 4
#define BX 8
#else
#define BZ 2
#define BY 4
#define BX 4
#endif

struct Geom {
    i64 Z, Y, X;   // the (Z, Y, X) view of the data
    u32 NBy, NBx;  // blocks along y and x
    u32 nblocks;
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
__device__ __forceinline__ void slot_coords(const BlockPos& p, int t, i64& z, i64& y, i64& x0) {
#if SZP_BDIM == 1
    z = p.bz; y = p.by; x0 = (i64)p.bx * 32 + 4 * t;
#elif SZP_BDIM == 2
    z = p.bz; y = (i64)p.by * 4 + (t >> 1); x0 = (i64)p.bx * 8 + (t & 1) * 4;
#else
    z = (i64)p.bz * 2 + (t >> 2); y = (i64)p.by * 4 + (t & 3); x0 = (i64)p.bx * 4;
#endif
}

// Byte g of each of a0..a3, packed into one word (byte s from a_s); an involution on
// the 4 x 4 byte matrix.
__device__ __forceinline__ u32 gather_byte(u32 a0, u32 a1, u32 a2, u32 a3, int g) {
    const u32 sel = (u32)g | ((u32)(g + 4) << 4);
    return __byte_perm(__byte_perm(a0, a1, sel), __byte_perm(a2, a3, sel), 0x5410);
}

// 8 x 8 bit transpose inside every byte, across the 8 lanes of a block: afterwards bit
// c of byte s in lane t is what bit t of byte s was in lane c.
__device__ __forceinline__ u32 transpose8(u32 x, int t) {
#pragma unroll
    for (int d = 4; d; d >>= 1) {
        const u32 mask = d == 4 ? 0x0F0F0F0Fu : (d == 2 ? 0x33333333u : 0x55555555u);
        const bool hi = (t & d) != 0;
        const u32 send = hi ? mask : ~mask;
        u32 y = __shfl_xor_sync(FULL, x & send, d);
        y = __funnelshift_l(y, y, hi ? 32 - d : d);
        x = (x & ~send) | y;
    }
    return x;
}

// Load 4 consecutive x-elements; out-of-range coordinates are clamped (edge padding).
__device__ __forceinline__ void load4(const T* __restrict__ x, const Geom& g, i64 z, i64 y,
                                      i64 x0, T v[4]) {
    i64 zc = z < g.Z ? z : g.Z - 1;
    i64 yc = y < g.Y ? y : g.Y - 1;
    const T* row = x + (zc * g.Y + yc) * g.X;
    const T* p = row + x0;
    if (x0 + 3 < g.X && (((unsigned long long)p) & 15) == 0) {
#if defined(SZP_F64)
        double2 a = __ldcs(reinterpret_cast<const double2*>(p));
        double2 c = __ldcs(reinterpret_cast<const double2*>(p) + 1);
        v[0] = a.x; v[1] = a.y; v[2] = c.x; v[3] = c.y;
#else
        float4 a = __ldcs(reinterpret_cast<const float4*>(p));
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
#endif
    } else {
#pragma unroll
        for (int s = 0; s < 4; s++) {
            i64 xs = x0 + s < g.X ? x0 + s : g.X - 1;
            v[s] = row[xs];
        }
    }
}

// Mirrors format.quantize. Subnormal inputs are outliers (told apart by their bits, which
// no flush-to-zero mode touches), so every float operand below is normal or zero.
__device__ __forceinline__ int quantize(T v, T recip, T step, T check, bool& bad) {
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
#pragma unroll
    for (int s = 0; s < 4; s++) {
        int up = __shfl_up_sync(FULL, q[s], 2);
        q[s] -= (t >> 1) > 0 ? up : 0;
    }
#elif SZP_BDIM == 3
#pragma unroll
    for (int s = 0; s < 4; s++) {
        int up = __shfl_up_sync(FULL, q[s], 1);
        q[s] -= (t & 3) > 0 ? up : 0;
    }
#pragma unroll
    for (int s = 0; s < 4; s++) {
        int up = __shfl_up_sync(FULL, q[s], 4);
        q[s] -= (t >> 2) > 0 ? up : 0;
    }
#endif
}

// Inverse Lorenzo: prefix sums along x, y, z inside the block (wrapping u32 arithmetic).
__device__ __forceinline__ void unlorenzo(u32 d[4], int t) {
    d[1] += d[0]; d[2] += d[1]; d[3] += d[2];
#if SZP_BDIM == 1
#pragma unroll
    for (int off = 1; off < 8; off <<= 1) {
        u32 carry = __shfl_up_sync(FULL, d[3], off);
        u32 add = t >= off ? carry : 0u;
#pragma unroll
        for (int s = 0; s < 4; s++) d[s] += add;
    }
#else
#if SZP_BDIM == 2
    {
        u32 carry = __shfl_up_sync(FULL, d[3], 1);
        u32 add = (t & 1) ? carry : 0u;
#pragma unroll
        for (int s = 0; s < 4; s++) d[s] += add;
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
#pragma unroll
        for (int s = 0; s < 4; s++) {
            u32 up = __shfl_up_sync(FULL, d[s], 2 * off);
            d[s] += (t >> 1) >= off ? up : 0u;
        }
    }
#else
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
#pragma unroll
        for (int s = 0; s < 4; s++) {
            u32 up = __shfl_up_sync(FULL, d[s], off);
            d[s] += (t & 3) >= off ? up : 0u;
        }
    }
#pragma unroll
    for (int s = 0; s < 4; s++) {
        u32 up = __shfl_up_sync(FULL, d[s], 4);
        d[s] += (t >> 2) >= 1 ? up : 0u;
    }
#endif
#endif
}

// Exclusive prefix (in words) of this tile's payload: decoupled look-back, run by warp 0.
__device__ __forceinline__ u64 tile_lookback(u64* status, u32 tile, u64 total, int lane) {
    volatile u64* vs = status;
    if (tile == 0) {
        if (lane == 0) vs[0] = FLAG_PRE | total;
        return 0;
    }
    if (lane == 0) vs[tile] = FLAG_AGG | total;
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

// Block sizes (words) -> this lane's block offset inside the tile, CTA-wide scan and
// look-back. Returns the tile's base word offset; fills off[] (per step, lane's block).
__device__ __forceinline__ u64 tile_offsets(const u32 nw[STEPS], u32 off[STEPS], u64* status,
                                            u32 tile, u32* s_wtot, u64* s_base) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j = lane >> 3;
    u32 run = 0;
#pragma unroll
    for (int i = 0; i < STEPS; i++) {
        const u32 sz = nw[i];
        u32 s0 = __shfl_sync(FULL, sz, 0), s1 = __shfl_sync(FULL, sz, 8);
        u32 s2 = __shfl_sync(FULL, sz, 16), s3 = __shfl_sync(FULL, sz, 24);
        off[i] = run + (j > 0 ? s0 : 0) + (j > 1 ? s1 : 0) + (j > 2 ? s2 : 0);
        run += s0 + s1 + s2 + s3;
    }
    if (lane == 0) s_wtot[warp] = run;
    __syncthreads();
    if (warp == 0) {
        u32 v = lane < WARPS ? s_wtot[lane] : 0u;
        u32 incl = v;
#pragma unroll
        for (int o = 1; o < WARPS; o <<= 1) {
            u32 n = __shfl_up_sync(FULL, incl, o);
            if (lane >= o) incl += n;
        }
        u32 total = __shfl_sync(FULL, incl, WARPS - 1);
        u64 excl = tile_lookback(status, tile, total, lane);
        __syncwarp();
        if (lane < WARPS) s_wtot[lane] = incl - v;
        if (lane == 0) *s_base = excl;
    }
    __syncthreads();
    return *s_base + s_wtot[warp];
}

// 5 CTAs per SM (<= 51 registers): without the hint ptxas picked a 40-register target
// for one variant (f32, 2-D blocks) and spilled 4 bytes to local memory.
extern "C" __global__ void __launch_bounds__(WARPS * 32, 5)
szp_compress(const T* __restrict__ x, i64 Z, i64 Y, i64 X, u32 NBy, u32 NBx, u32 nblocks, T recip,
             T step, T check, unsigned char* __restrict__ widths, u32* __restrict__ payload,
             u64* status, u32* tile_counter, u64* __restrict__ out_idx, T* __restrict__ out_val,
             u64* out_count, u64 out_cap) {
    __shared__ u32 s_tile;
    __shared__ u32 s_wtot[WARPS];
    __shared__ u64 s_base;
    const Geom g = {Z, Y, X, NBy, NBx, nblocks};
    if (threadIdx.x == 0) s_tile = atomicAdd(tile_counter, 1u);
    __syncthreads();
    const u32 tile = s_tile;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j = lane >> 3, t = lane & 7;
    const u32 b0 = tile * TILE_BLOCKS + warp * (STEPS * 4) + j;
    BlockPos pos = block_pos(g, b0 < nblocks ? b0 : 0u);

    u32 ext[STEPS][4];  // |residual| << 1 | sign
    u32 nw[STEPS];      // words of this lane's block: 0, or width + 1
#pragma unroll
    for (int i = 0; i < STEPS; i++) {
        const u32 b = b0 + 4 * i;
        const bool valid = b < g.nblocks;
        i64 z = 0, y = 0, x0 = 0;
        T v[4] = {0, 0, 0, 0};
        if (valid) {
            slot_coords(pos, t, z, y, x0);
            load4(x, g, z, y, x0, v);
        }
        const bool row_in = valid && z < g.Z && y < g.Y;
        int q[4];
#pragma unroll
        for (int s = 0; s < 4; s++) {
            bool bad;
            q[s] = quantize(v[s], recip, step, check, bad);
            if (bad && row_in && x0 + s < g.X) {
                u64 k = atomicAdd(out_count, 1ULL);
                if (k < out_cap) {
                    out_idx[k] = (u64)((z * g.Y + y) * g.X + x0 + s);
                    out_val[k] = v[s];
                }
            }
        }
        lorenzo(q, t);
        u32 m = 0;
#pragma unroll
        for (int s = 0; s < 4; s++) {
            ext[i][s] = ((u32)abs(q[s]) << 1) | (q[s] < 0 ? 1u : 0u);
            m |= ext[i][s];
        }
        m |= __shfl_xor_sync(FULL, m, 1);
        m |= __shfl_xor_sync(FULL, m, 2);
        m |= __shfl_xor_sync(FULL, m, 4);
        nw[i] = valid ? 32 - __clz(m) : 0u;
        // one 4-byte store of the 4 blocks' widths per step (b of lane 0 is 4-aligned)
        const u32 wd = nw[i] ? nw[i] - 1 : 0u;
        const u32 w4 = __shfl_sync(FULL, wd, 0) | (__shfl_sync(FULL, wd, 8) << 8) |
                       (__shfl_sync(FULL, wd, 16) << 16) | (__shfl_sync(FULL, wd, 24) << 24);
        if (lane == 0 && valid) {
            if (b + 3 < g.nblocks) {
                *reinterpret_cast<u32*>(widths + b) = w4;
            } else {
                for (u32 k = 0; b + k < g.nblocks; k++) widths[b + k] = (w4 >> (8 * k)) & 0xff;
            }
        }
        advance4(g, pos);
    }

    u32 off[STEPS];
    const u64 base = tile_offsets(nw, off, status, tile, s_wtot, &s_base);

    // Encode: 8 words per transpose; lane t stores word 8 gi + t of its block.
#pragma unroll
    for (int i = 0; i < STEPS; i++) {
        const u32 maxn = __reduce_max_sync(FULL, nw[i]);
        u32* blk = payload + base + off[i];
#pragma unroll
        for (int gi = 0; gi < 4; gi++) {
            if ((u32)(8 * gi) >= maxn) break;
            u32 word = gather_byte(ext[i][0], ext[i][1], ext[i][2], ext[i][3], gi);
            word = transpose8(word, t);
            const u32 mi = 8 * gi + t;
            if (mi < nw[i]) blk[mi] = word;
        }
    }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
szp_decompress(T* __restrict__ y_out, i64 Z, i64 Y, i64 X, u32 NBy, u32 NBx, u32 nblocks, T step,
               const unsigned char* __restrict__ widths, const u32* __restrict__ payload,
               u64* status, u32* tile_counter, u32* error) {
    __shared__ u32 s_tile;
    __shared__ u32 s_wtot[WARPS];
    __shared__ u64 s_base;
    const Geom g = {Z, Y, X, NBy, NBx, nblocks};
    if (threadIdx.x == 0) s_tile = atomicAdd(tile_counter, 1u);
    __syncthreads();
    const u32 tile = s_tile;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j = lane >> 3, t = lane & 7;
    const u32 b0 = tile * TILE_BLOCKS + warp * (STEPS * 4) + j;

    u32 nw[STEPS];
#pragma unroll
    for (int i = 0; i < STEPS; i++) {
        const u32 b = b0 + 4 * i;
        u32 w = b < g.nblocks ? (u32)widths[b] : 0u;
        if (w > MAX_WIDTH) {
            atomicOr(error, 1u);
            w = 0;
        }
        nw[i] = w ? w + 1 : 0u;
    }
    u32 off[STEPS];
    const u64 base = tile_offsets(nw, off, status, tile, s_wtot, &s_base);

    BlockPos pos = block_pos(g, b0 < nblocks ? b0 : 0u);
#pragma unroll
    for (int i = 0; i < STEPS; i++) {
        const u32 b = b0 + 4 * i;
        const u32 maxn = __reduce_max_sync(FULL, nw[i]);
        const u32* blk = payload + base + off[i];
        u32 G[4] = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int gi = 0; gi < 4; gi++) {
            if ((u32)(8 * gi) >= maxn) break;
            const u32 mi = 8 * gi + t;
            const u32 word = mi < nw[i] ? __ldg(blk + mi) : 0u;
            G[gi] = transpose8(word, t);
        }
        u32 d[4];
#pragma unroll
        for (int s = 0; s < 4; s++) {
            const u32 e = gather_byte(G[0], G[1], G[2], G[3], s);
            d[s] = (e & 1u) ? 0u - (e >> 1) : (e >> 1);
        }
        unlorenzo(d, t);
        if (b < g.nblocks) {
            i64 z, y, x0;
            slot_coords(pos, t, z, y, x0);
            if (z < g.Z && y < g.Y) {
                T v[4];
#pragma unroll
                for (int s = 0; s < 4; s++) {
#if defined(SZP_F64)
                    v[s] = __dmul_rn((double)(int)d[s], step);
#else
                    v[s] = __fmul_rn(__int2float_rn((int)d[s]), step);
#endif
                }
                T* p = y_out + (z * g.Y + y) * g.X + x0;
                if (x0 + 3 < g.X && (((unsigned long long)p) & 15) == 0) {
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
        }
        advance4(g, pos);
    }
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

extern "C" __global__ void szp_minmax(const T* __restrict__ x, u64 n, KEY* keys) {
    KEY lo = (KEY)~(KEY)0, hi = 0;
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 nth = (u64)gridDim.x * blockDim.x;
    const bool vec = (((unsigned long long)x) & 15) == 0;
    const u64 nvec = vec ? n / 4 : 0;
    for (u64 i = tid; i < nvec; i += nth) {
        T v[4];
#if defined(SZP_F64)
        double2 a = __ldcs(reinterpret_cast<const double2*>(x) + 2 * i);
        double2 c = __ldcs(reinterpret_cast<const double2*>(x) + 2 * i + 1);
        v[0] = a.x; v[1] = a.y; v[2] = c.x; v[3] = c.y;
#else
        float4 a = __ldcs(reinterpret_cast<const float4*>(x) + i);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
#endif
#pragma unroll
        for (int s = 0; s < 4; s++) {
            if (isfinite(v[s])) {
                KEY k = to_key(v[s]);
                lo = k < lo ? k : lo;
                hi = k > hi ? k : hi;
            }
        }
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
