/*@kernelwright
[knobs]
BLOCK = [256, 128, 512]

[[launch]]
kernel = "maxpool3x3s2"
grid = "ceil_div(N * C * OH * OW, BLOCK)"
block = "BLOCK"
args = ["x", "y", "N * C * OH * OW:i64", "H", "W", "OH", "OW"]
@*/
// One thread per output element; each reads its 3x3 window straight from global memory.
extern "C" __global__ void maxpool3x3s2(const float* __restrict__ x, float* __restrict__ y, long long total,
                                        int H, int W, int OH, int OW) {
    long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (t >= total) return;
    int j = (int)(t % OW);
    long long r = t / OW;
    int i = (int)(r % OH);
    long long plane = r / OH;
    const float* in = x + plane * H * W + (long long)(2 * i) * W + 2 * j;
    float m = in[0];
    for (int di = 0; di < 3; ++di)
        for (int dj = 0; dj < 3; ++dj)
            m = fmaxf(m, in[di * W + dj]);
    y[t] = m;
}
