// The simulator's compiled event core: simulator/engine.py's event loop, in C++.
//
// It re-implements, operation for operation, three things the Python engine imports:
//   - the CP (qcn.core.cp_model: CongestionPoint.sample, overwrite_fb_tag, end_reflection,
//     and DCQCN's marking, ecn_marks),
//   - the RP rules of every scheme (reaction_point/rules.py: QcnRules, TwoQcnRules,
//     TimerQcnRules, EcmRules, DcqcnRules; Fb-hat, the adaptive timer, positive
//     reinforcement),
//   - Python's random.Random (MT19937: random(), getrandbits(), randint(), expovariate()),
// so that a run gives the Python engine's trace bit for bit: the same draws in the same
// order, every floating-point operation in Python's order (built with -ffp-contract=off).
// tests/test_sim_core.py holds the CP and RP to the Python definitions field by field over
// random event sequences; simulator/compiled.py builds a run's state with the Python
// engine's own constructor and hands it over (docs/simulator.md).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

constexpr double INF = std::numeric_limits<double>::infinity();
/// None, for the Python engine's optional times (timer deadlines): never a time.
constexpr double NONE = -std::numeric_limits<double>::max();
inline bool is_none(double t) { return t == NONE; }

// Python's min/max of two floats: min keeps the first unless the second is smaller.
inline double pmin(double a, double b) { return b < a ? b : a; }
inline double pmax(double a, double b) { return b > a ? b : a; }

// -- Python's random.Random ------------------------------------------------------------------

/// One stream.  Its 2.5 KB of words live apart from the cursor: a CP's stream rides in
/// its port's record (Cp::rand), so a draw reads the line of the record it reads anyway,
/// and one word.  (The whole state inline made each port 5.8 KB, and the cursor at its end
/// was one more line a draw.  Four outputs tempered ahead into the record saved nothing
/// measurable at 1,024 hosts and cost the transient 7 %.)
struct MT {
  std::unique_ptr<std::array<uint32_t, 624>> words = std::make_unique<std::array<uint32_t, 624>>();
  int index = 624;

  void set_state(const std::vector<uint64_t>& state) {
    if (state.size() != 625) throw std::invalid_argument("an MT19937 state is 625 integers");
    for (int i = 0; i < 624; i++) (*words)[i] = static_cast<uint32_t>(state[i]);
    index = static_cast<int>(state[624]);
  }
  void twist() {
    constexpr uint32_t UPPER = 0x80000000u, LOWER = 0x7fffffffu, MATRIX = 0x9908b0dfu;
    std::array<uint32_t, 624>& mt = *words;
    int kk = 0;
    uint32_t y;
    for (; kk < 624 - 397; kk++) {
      y = (mt[kk] & UPPER) | (mt[kk + 1] & LOWER);
      mt[kk] = mt[kk + 397] ^ (y >> 1) ^ ((y & 1u) ? MATRIX : 0u);
    }
    for (; kk < 623; kk++) {
      y = (mt[kk] & UPPER) | (mt[kk + 1] & LOWER);
      mt[kk] = mt[kk + (397 - 624)] ^ (y >> 1) ^ ((y & 1u) ? MATRIX : 0u);
    }
    y = (mt[623] & UPPER) | (mt[0] & LOWER);
    mt[623] = mt[396] ^ (y >> 1) ^ ((y & 1u) ? MATRIX : 0u);
    index = 0;
  }
  uint32_t next() {
    if (index >= 624) twist();
    uint32_t y = (*words)[index++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
  }
  /// random(): 53 bits from two words, as CPython's random_random.
  double random() {
    uint32_t a = next() >> 5, b = next() >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
  }
  /// getrandbits(k), k <= 64: words from least to most significant, as CPython.
  uint64_t getrandbits(int k) {
    if (k == 0) return 0;
    if (k <= 32) return next() >> (32 - k);
    uint64_t lo = next();
    uint64_t hi = next() >> (64 - k);
    return (hi << 32) | lo;
  }
  /// randint(lo, hi) as qcn's fast_randint (CPython's _randbelow_with_getrandbits).
  int64_t randint(int64_t lo, int64_t hi) {
    uint64_t width = static_cast<uint64_t>(hi - lo) + 1;
    int k = 64 - __builtin_clzll(width);
    uint64_t r = getrandbits(k);
    while (r >= width) r = getrandbits(k);
    return lo + static_cast<int64_t>(r);
  }
  /// expovariate(lambd) = -log(1 - random()) / lambd.
  double expovariate(double lambd) { return -std::log(1.0 - random()) / lambd; }
};

// -- the CP (qcn.core.cp_model) --------------------------------------------------------------

constexpr int QNTZ_FB_MAX = 63;
constexpr int QNTZ_SHIFT = 48;
constexpr int64_t W_ONE = 16;
constexpr int64_t PROB_ONE = 1 << 24;
constexpr int ECN_SLOPE_SHIFT = 16;
constexpr int16_t INT16_MIN_ = -32768, INT16_MAX_ = 32767;

struct CpConfig {
  int64_t q_eq = 0, w_fixed = 0, fbmax_fixed = 1, fb_multiplier = 0;
  int64_t p_base_fixed = 0, p_scale_fixed = 0;
  bool bernoulli = true;
  bool ecn = false;  // DCQCN: the port marks ECN in place of sampling (cp.signal = "ecn")
  std::vector<std::pair<int64_t, int64_t>> intervals;  // (base, jitter span)
  bool positive_feedback = false, three_point = false;
  bool judge_dropped = true;  // the arrival CP judges the frames its buffer drops too
  int64_t reflect_p_base_fixed = PROB_ONE, reflect_p_scale_fixed = 0, p0_fixed = 0;
  // DCQCN: the marking's ramp (ecn_marks)
  int64_t kmin_bytes = 0, kmax_bytes = 1, ecn_slope = 0;

  int quantize_magnitude(int64_t magnitude) const {
    __int128 m = std::min(magnitude, fbmax_fixed);
    int64_t v = static_cast<int64_t>((m * fb_multiplier) >> QNTZ_SHIFT);
    return static_cast<int>(std::min<int64_t>(QNTZ_FB_MAX, v));
  }
  int quantize(int64_t fb_fp) const { return fb_fp >= 0 ? 0 : quantize_magnitude(-fb_fp); }
  int64_t sample_threshold(int qntz) const { return p_base_fixed + qntz * p_scale_fixed; }
  int64_t reflect_threshold(int qntz) const {
    return reflect_p_base_fixed + qntz * reflect_p_scale_fixed;
  }
  int64_t p_max_fixed() const { return sample_threshold(QNTZ_FB_MAX); }
};

struct Decision {
  int64_t q = 0, qoff = 0, qdelta = 0, fb_fp = 0;
  int qntz_fb = 0;
  bool sampled = false, positive = false;
  bool cnm() const { return sampled && (fb_fp < 0 || positive); }
};

struct Cp {
  const CpConfig* cfg = nullptr;
  MT rand;  // its stream: the cursor here, in the port's record; the words apart
  int64_t p_max = 0;
  int64_t q_old = 0, bytes_to_sample = 0;

  void init(const CpConfig* c) {
    cfg = c;
    p_max = c->p_max_fixed();
  }
  /// CongestionPoint.reconfigure: new parameters, the registers kept.
  void reconfigure(const CpConfig* c) { init(c); }
  /// CongestionPoint.sample: false where stage 1 rules the frame out.
  bool sample(int64_t q, int64_t frame_bytes, Decision& d) {
    if (cfg->bernoulli) {
      int64_t r = rand.randint(0, PROB_ONE - 1);
      if (r >= p_max) return false;
      judge(q, r, d);
      return true;
    }
    bytes_to_sample -= frame_bytes;
    if (bytes_to_sample > 0) return false;
    judge(q, 0, d);
    return true;
  }
  /// CongestionPoint.on_frame.
  void on_frame(int64_t q, int64_t frame_bytes, Decision& d) {
    if (cfg->bernoulli) {
      judge(q, rand.randint(0, PROB_ONE - 1), d);
      return;
    }
    bytes_to_sample -= frame_bytes;
    judge(q, 0, d);
  }
  void judge(int64_t q, int64_t r, Decision& d) {
    const CpConfig& c = *cfg;
    int64_t qoff = q - c.q_eq;
    int64_t qdelta = q - q_old;
    int64_t fb_fp = -(qoff * W_ONE + c.w_fixed * qdelta);
    int qntz = c.quantize(fb_fp);
    bool sampled;
    if (c.bernoulli) {
      sampled = r < c.sample_threshold(qntz);
    } else {
      sampled = bytes_to_sample <= 0;
      if (sampled) {
        const auto& row = c.intervals[qntz >> 3];
        bytes_to_sample = row.first - row.second / 2 + rand.randint(0, row.second);
      }
    }
    if (sampled) q_old = q;
    d.q = q;
    d.qoff = qoff;
    d.qdelta = qdelta;
    d.fb_fp = fb_fp;
    d.sampled = sampled;
    if (c.positive_feedback && fb_fp > 0) {
      d.qntz_fb = c.quantize_magnitude(fb_fp);
      d.positive = true;
    } else {
      d.qntz_fb = qntz;
      d.positive = false;
    }
  }
};

/// ecn_marks: whether a port marks CE a frame that finds ``q_bytes`` queued.  One draw,
/// and only on the ramp (kmin < q <= kmax); (q - kmin) * slope is below pmax * 2^40 there.
/// (Out of line, as DCQCN's transmit step is: only DCQCN runs call either, and the arrival
/// and the send every run takes stay as small as they were.)
[[gnu::noinline]] bool ecn_marks(int64_t q_bytes, const CpConfig& c, MT& rand) {
  if (q_bytes > c.kmax_bytes) return true;
  if (q_bytes <= c.kmin_bytes) return false;
  int64_t threshold = ((q_bytes - c.kmin_bytes) * c.ecn_slope) >> ECN_SLOPE_SHIFT;
  return rand.randint(0, PROB_ONE - 1) < threshold;
}

/// The Fb tag a frame carries (qcn.core.cp_model.FbTag), and in its spare byte the
/// frame's ECN mark (DCQCN's CE; three-point QCN and ECN never share a port).
struct Tag {
  bool reflected = false;
  int8_t qntz_fb = 0;
  bool ce = false;
  int32_t cpid = 0;
  int16_t qoff = 0, qdelta = 0;
};

inline int16_t sat16(int64_t v) {
  return static_cast<int16_t>(std::max<int64_t>(INT16_MIN_, std::min<int64_t>(INT16_MAX_, v)));
}

/// overwrite_fb_tag: true (and ``out`` set) where the CP takes the tag over.
bool overwrite_fb_tag(const Decision& d, const Tag& tag, const CpConfig& cfg, int32_t cpid,
                      MT& rand, Tag& out) {
  if (!(d.sampled && d.fb_fp < 0 && d.qntz_fb > tag.qntz_fb)) return false;
  bool reflected = rand.randint(0, PROB_ONE - 1) < cfg.reflect_threshold(d.qntz_fb);
  out.reflected = reflected;
  out.qntz_fb = static_cast<int8_t>(d.qntz_fb);
  out.cpid = cpid;
  out.qoff = sat16(d.qoff);
  out.qdelta = sat16(d.qdelta);
  return true;
}

/// end_reflection: true (and ``out`` set) where the end reflection point reflects.
bool end_reflection(const Tag& tag, const CpConfig& cfg, int32_t cpid, MT& rand, Tag& out) {
  int64_t below = tag.qntz_fb == 0 ? cfg.p0_fixed : cfg.reflect_threshold(tag.qntz_fb);
  int64_t r = rand.randint(0, PROB_ONE - 1);
  if (tag.reflected || r >= below) return false;
  out = tag;
  if (!tag.qntz_fb) out.cpid = cpid;
  return true;
}

// -- the RP rules (reaction_point/rules.py) --------------------------------------------------

enum Scheme { QCN = 0, TWO_QCN = 1, TIMER_QCN = 2, ECM = 3, DCQCN = 4 };

struct RpParams {
  int scheme = QCN;
  double line_rate_bps = 10e9, min_rate_bps = 10e6, gd = 1.0 / 128, bc_limit_bytes = 150000;
  double timer_s = 0.015, r_ai_bps = 5e6, r_hai_bps = 50e6, jitter = 0.15;
  int64_t fast_recovery_th = 5, hai_min_frames = 500, frame_bytes = 1500;
  bool timer_enabled = true, hai_enabled = true, shorten_cycles_after_fr = true;
  bool fb_hat = false, positive_reinforcement = false, adaptive_timer = false;
  double timer_expiry_factor = 0.9, timer_expiry_step_s = 0.0, timer_cnm_factor = 1.25;
  double timer_cnm_step_s = 0.0, adaptive_timer_span = 4.0;
  // ECM's own (EcmParams)
  double ecm_gi = 0.53333, ecm_gd = 0.00026667, ecm_ru_bps = 1e6, ecm_rd_bps = 1e6;
  double ecm_td_s = 1e-3, ecm_fb_max = 1875.0;
  // DCQCN's own (DcqcnParams)
  double dcqcn_g = 1.0 / 256, dcqcn_alpha_timer_s = 55e-6, dcqcn_alpha_initial = 1.0;
};

constexpr int FB_HAT_MAX = 31, FB_HAT_HALVING_FRAMES = 50, FB_HAT_SHORT_CYCLE_MAX = 1;

struct Rp {
  const RpParams* p = nullptr;
  double timer_period_s = 0, current_rate_bps = 0, target_rate_bps = 0;
  int64_t byte_stage = 0, time_stage = 0;
  double bytes_left = 0.0;
  double timer_deadline = NONE;
  int64_t frames_since_cnm = 0, cnms = 0, reinforcements = 0;
  int64_t fb_hat = 0, frames_since_halving = 0;
  // DCQCN: alpha as of the last CNP, and when that was (NONE: never cut)
  double alpha = 0, alpha_since = NONE;

  void init(const RpParams* params) {
    p = params;
    timer_period_s = p->timer_s;
    current_rate_bps = target_rate_bps = p->line_rate_bps;
    byte_stage = time_stage = 0;
    bytes_left = 0.0;
    timer_deadline = NONE;
    frames_since_cnm = cnms = reinforcements = fb_hat = frames_since_halving = 0;
    alpha = p->dcqcn_alpha_initial;
    alpha_since = NONE;
  }

  bool timer_runs() const {
    switch (p->scheme) {
      case QCN: return p->timer_enabled;
      case TWO_QCN: return false;
      default: return true;  // TIMER_QCN (ECM never asks)
    }
  }
  double jitter(MT& u) const {
    double j = p->jitter;
    return 1.0 - j + 2.0 * j * u.random();
  }
  double cycle_bytes() const {
    if (p->fb_hat) {
      int64_t frames = fb_hat <= FB_HAT_SHORT_CYCLE_MAX ? 50 : 100;
      return static_cast<double>(frames * p->frame_bytes);
    }
    return p->bc_limit_bytes;
  }
  void cycles_sent(int64_t frames) {
    if (!p->fb_hat) return;
    frames_since_halving += frames;
    while (frames_since_halving >= FB_HAT_HALVING_FRAMES) {
      frames_since_halving -= FB_HAT_HALVING_FRAMES;
      fb_hat >>= 1;
    }
  }
  double bounded(double period_s) const {
    double span = p->adaptive_timer_span;
    return pmin(p->timer_s * span, pmax(p->timer_s / span, period_s));
  }
  double after_expiry(double period_s) const {
    if (!p->adaptive_timer) return period_s;
    return bounded(period_s * p->timer_expiry_factor - p->timer_expiry_step_s);
  }
  double after_cnm(double period_s) const {
    if (!p->adaptive_timer) return period_s;
    return bounded(period_s * p->timer_cnm_factor + p->timer_cnm_step_s);
  }
  double byte_cycle(MT& u) const {
    double limit = cycle_bytes();
    if (p->shorten_cycles_after_fr && byte_stage >= p->fast_recovery_th) limit /= 2;
    return limit * jitter(u);
  }
  double timer_cycle(MT& u) const {
    double period = timer_period_s;
    if (p->shorten_cycles_after_fr && time_stage >= p->fast_recovery_th) period /= 2;
    return period * jitter(u);
  }
  int64_t hai_stages() const {
    return p->scheme == TIMER_QCN ? time_stage : std::min(byte_stage, time_stage);
  }
  bool hyper_active() const {
    if (p->scheme == TWO_QCN || p->scheme == ECM) return false;
    return p->hai_enabled && hai_stages() > p->fast_recovery_th &&
           frames_since_cnm >= p->hai_min_frames;
  }
  void increase() {
    int64_t th = p->fast_recovery_th;
    if (hyper_active()) {
      target_rate_bps += p->r_hai_bps * static_cast<double>(hai_stages() - th);
    } else if (byte_stage > th || time_stage > th) {
      target_rate_bps += p->r_ai_bps;
    }
    if ((byte_stage == 1 || time_stage == 1) && target_rate_bps > 10 * current_rate_bps) {
      target_rate_bps /= 8;
    }
    current_rate_bps = pmin((current_rate_bps + target_rate_bps) / 2, p->line_rate_bps);
  }

  void on_cnm(int qntz_fb, bool positive, double now, MT& u) {
    if (qntz_fb < 0 || qntz_fb > QNTZ_FB_MAX) throw std::invalid_argument("QntzFb out of range");
    if (p->scheme == ECM) {
      ecm_feedback(qntz_fb, positive, now);
      return;
    }
    if (p->scheme == DCQCN) {
      dcqcn_cut(now, u);
      return;
    }
    if (positive) return;
    if (qntz_fb == 0 && p->positive_reinforcement) {
      reinforce(now, u);
      return;
    }
    if (!is_none(timer_deadline)) timer_period_s = after_cnm(timer_period_s);
    cnms += 1;
    if (byte_stage != 0) target_rate_bps = current_rate_bps;
    current_rate_bps = pmax(p->min_rate_bps, current_rate_bps * (1 - p->gd * qntz_fb));
    byte_stage = 0;
    time_stage = 0;
    frames_since_cnm = 0;
    if (p->fb_hat) fb_hat = std::min<int64_t>(FB_HAT_MAX, fb_hat + qntz_fb);
    bytes_left = byte_cycle(u);
    if (timer_runs()) timer_deadline = now + timer_cycle(u);
  }
  void reinforce(double now, MT& u) {
    if (cnms == 0) return;
    reinforcements += 1;
    if (p->scheme != TIMER_QCN) {
      byte_stage += 1;
      bytes_left = byte_cycle(u);
    }
    if (timer_runs()) {
      time_stage += 1;
      timer_deadline = now + timer_cycle(u);
    }
    increase();
  }
  void ecm_feedback(int qntz_fb, bool positive, double now) {
    double fb = qntz_fb * p->ecm_fb_max / QNTZ_FB_MAX;
    double rate;
    if (positive) {
      if (cnms == 0) return;
      rate = current_rate_bps + p->ecm_gi * fb * p->ecm_ru_bps;
    } else {
      rate = current_rate_bps * (1 - p->ecm_gd * fb);
    }
    cnms += 1;
    current_rate_bps = pmin(p->line_rate_bps, pmax(p->min_rate_bps, rate));
    target_rate_bps = current_rate_bps;
    frames_since_cnm = 0;
    timer_deadline = now + p->ecm_td_s;
  }
  // DcqcnRules: alpha decays (1 - g) once per K since the last CNP, applied when read.
  double alpha_at(double now) const {
    if (is_none(alpha_since)) return alpha;
    double decays = std::floor((now - alpha_since) / p->dcqcn_alpha_timer_s);
    return decays > 0 ? alpha * std::pow(1.0 - p->dcqcn_g, decays) : alpha;
  }
  void dcqcn_cut(double now, MT& u) {
    double a = alpha_at(now);
    cnms += 1;
    target_rate_bps = current_rate_bps;
    current_rate_bps = pmax(p->min_rate_bps, current_rate_bps * (1 - a / 2));
    alpha = (1 - p->dcqcn_g) * a + p->dcqcn_g;
    alpha_since = now;
    byte_stage = 0;
    time_stage = 0;
    frames_since_cnm = 0;
    bytes_left = p->bc_limit_bytes * jitter(u);
    if (p->timer_enabled) timer_deadline = now + p->timer_s * jitter(u);
  }
  // QCN's stages without its TR/8 rule and without HAI's frame count.
  void dcqcn_increase() {
    int64_t th = p->fast_recovery_th;
    int64_t both = std::min(byte_stage, time_stage);
    if (p->hai_enabled && both > th) {
      target_rate_bps += p->r_hai_bps * static_cast<double>(both - th);
    } else if (byte_stage > th || time_stage > th) {
      target_rate_bps += p->r_ai_bps;
    }
    current_rate_bps = pmin((current_rate_bps + target_rate_bps) / 2, p->line_rate_bps);
  }
  [[gnu::noinline]] void dcqcn_transmit(int64_t nbytes, MT& u) {
    if (cnms == 0) return;
    bytes_left -= static_cast<double>(nbytes);
    if (bytes_left <= 0) {
      byte_stage += 1;
      bytes_left = p->bc_limit_bytes * jitter(u);
      dcqcn_increase();
    }
  }
  void on_transmit(int64_t nbytes, int64_t frames, MT& u) {
    frames_since_cnm += frames;
    if (p->scheme == ECM) return;
    if (__builtin_expect(p->scheme == DCQCN, 0)) {
      dcqcn_transmit(nbytes, u);
      return;
    }
    cycles_sent(frames);
    if (p->scheme == TIMER_QCN) return;
    if (cnms == 0) return;
    bytes_left -= static_cast<double>(nbytes);
    if (bytes_left < 0) {
      byte_stage += 1;
      bytes_left = byte_cycle(u);
      increase();
    }
  }
  void end_timer_cycle(double next_starts, MT& u) {
    if (p->scheme == ECM) {
      current_rate_bps = pmin(p->line_rate_bps, current_rate_bps + p->ecm_rd_bps);
      target_rate_bps = current_rate_bps;
      timer_deadline = next_starts + p->ecm_td_s;
      return;
    }
    if (p->scheme == DCQCN) {
      time_stage += 1;
      timer_deadline = next_starts + p->timer_s * jitter(u);
      dcqcn_increase();
      return;
    }
    timer_period_s = after_expiry(timer_period_s);
    time_stage += 1;
    timer_deadline = next_starts + timer_cycle(u);
    increase();
  }
  void on_timer(double now, MT& u) {
    if (is_none(timer_deadline)) return;
    end_timer_cycle(now, u);
  }
  int64_t advance(double now, MT& u) {
    int64_t fired = 0;
    while (!is_none(timer_deadline) && timer_deadline <= now) {
      end_timer_cycle(timer_deadline, u);
      fired += 1;
    }
    return fired;
  }
};

// -- the engine's state (simulator/engine.py: Port, Input, Source, Route, ActiveFlow) --------

// Event kinds, in the Python engine's order.
enum Kind { RATE = 0, DEPART, ARRIVE, CNM, CNM_POSITIVE, CNP, PAUSE, RESUME, TIMER,
            RETRANSMIT, FLOW, SEND, SAMPLE };

/// A frame: 32 bytes, aligned, so a port's queue holds two to a cache line.  Its flow, in
/// the flows workload, is its target (a source's frame has none), and where it is on its
/// route is one index into the hops of every route (Core::hops).
struct alignas(32) Frame {
  int32_t target;  // the CNMs' target: its source, or its flow (flow mode)
  int32_t q;
  int32_t bytes;
  int32_t index;  // its number in its flow (flow mode)
  int32_t hop;    // Core::hops: the hop of its route it is at
  Tag tag;
};
static_assert(sizeof(Frame) == 32, "two frames to a cache line");

/// Where a ring keeps its first entries: nowhere (all on the heap), or in its own record.
struct NoInline {};
template <typename T, size_t N>
struct InlineEntries {
  std::array<T, N> local{};
};

/// A FIFO that grows (a ring buffer): a port's frames, a source's flows in turn (Python's
/// deque in simulator/engine.py, with rotate(-1) as pop_front + push_back).  With
/// ``Inline`` > 0 its first entries are in its own record until it outgrows them: a
/// source's few flows are read where the source is, not one more load away.
template <typename T, size_t MinCapacity, size_t Inline = 0>
struct Ring : private std::conditional_t<Inline == 0, NoInline, InlineEntries<T, Inline>> {
  std::unique_ptr<T[]> buf;
  uint32_t cap = Inline, head = 0, n = 0;  // (24 bytes: a port's two ride in its hot lines)
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  T& front() { return data()[head]; }
  const T& operator[](size_t i) const { return data()[slot(i)]; }
  T& operator[](size_t i) { return data()[slot(i)]; }
  void push_back(const T& v) {
    if (n == cap) grow();
    data()[slot(n)] = v;
    n++;
  }
  T pop_front() {
    T v = data()[head];
    if (++head == cap) head = 0;
    n--;
    return v;
  }
  void rotate_left() { push_back(pop_front()); }

 private:
  T* data() {
    if constexpr (Inline > 0) {
      if (!buf) return this->local.data();
    }
    return buf.get();
  }
  const T* data() const { return const_cast<Ring*>(this)->data(); }
  size_t slot(size_t i) const {
    size_t at = head + i;
    return at >= cap ? at - cap : at;
  }
  void grow() {
    uint32_t bigger_cap = std::max<uint32_t>(std::max<uint32_t>(MinCapacity, Inline), cap * 2);
    std::unique_ptr<T[]> bigger(new T[bigger_cap]);
    for (size_t i = 0; i < n; i++) bigger[i] = data()[slot(i)];
    buf.swap(bigger);
    cap = bigger_cap;
    head = 0;
  }
};

using Fifo = Ring<Frame, 16>;

/// Frames on the wire of every link of one delay, by the time each lands (an ARRIVE
/// event, without the event heap: three of every four events pushed there in a
/// leaf-spine run were these).  A port sends no frame before its last, and ``now`` only
/// grows, so over links of one delay the frames land in the order they left: a FIFO, kept
/// in the heap's order for ARRIVE events, time and then port (equal times put in port
/// order as they come).
struct Wire {
  struct Landing {
    double t;
    int32_t port;
  };
  Ring<Landing, 16> landings;
  bool empty() const { return landings.empty(); }
  const Landing& front() { return landings.front(); }
  void push(double t, int32_t port) {
    landings.push_back(Landing{t, port});
    for (size_t k = landings.size() - 1; k > 0; k--) {
      Landing& before = landings[k - 1];
      Landing& mine = landings[k];
      if (before.t != mine.t || before.port <= mine.port) break;
      std::swap(before, mine);
    }
  }
};

/// A port.  What a frame's arrival and departure read comes first, in three cache lines
/// (the record is aligned to a line): at a thousand ports a port's record is out of the
/// caches by its next frame, and each line it spans is one more miss.  Counters read at
/// the end or at a CNM follow.
struct alignas(64) Port {
  // what every frame reads
  Fifo queue;
  int64_t queue_bytes = 0;
  double rate_bps = 0;
  double paused_until = 0.0;
  double last_depart = -INF;  // paced: the previous departure
  int64_t window_bytes = 0;
  bool sending = false;
  bool has_cp = false, arrival_cp = false;
  bool paced = false;  // served as BMv2 serves (simulator/engine.py: Port.paced)
  int32_t wire = -1;   // Core::wires: its link's, by delay (none where the delay is 0)
  int64_t buffer_pkts = 0;
  int64_t service_bits = 0;  // paced: a frame's turn (a full frame's, or 0 where unshaped)
  double delay_s = 0;
  Fifo pipe;
  Cp cp;
  // counters, and what PAUSE reads
  double resume_at = -INF;
  int64_t drops = 0, cnms = 0;
  int64_t cp_reflections = 0, fb_reflections = 0, p0_reflections = 0;
  int64_t marks = 0;  // DCQCN: frames it marked CE
  std::array<int64_t, QNTZ_FB_MAX + 1> qntz_counts{};  // CNMs by QntzFb (a live view's)
};
static_assert(offsetof(Port, resume_at) <= 3 * 64, "what every frame reads, in three lines");

struct Input {
  int64_t partition_bytes = 0;
  double delay_s = 0, quantum_s = 0;
  int32_t source = -1, upstream = -1;
  int64_t buffered_bytes = 0;
  double holds_until = -INF;
  int64_t pauses = 0;
};

/// One hop of a route: the port a frame enters there, the input that holds it (PAUSE), the
/// delay of a CNM sent from there back to the source.  A route's hops are consecutive in
/// Core::hops, so a frame walking its route reads one record a hop, the next one beside it.
struct Hop {
  double cnm_delay_s = 0;
  int32_t port = 0;
  int32_t input = -1;
  int32_t route = 0;
  bool last = false;
};

struct Route {
  int32_t source = 0;
  int32_t first = 0, last = 0;  // its first and last hops (Core::hops)
  double ack_after_depart_s = 0;
};

using IdDeque = Ring<int32_t, 8>;
using FlowTurns = Ring<int32_t, 16, 8>;  // a source's flows in turn: its first eight inline

struct Source {
  bool has_rules = false;
  Rp rules;
  double offered_bps = 0, line_rate_bps = 0, slot_s = 0, quantum_s = 0;
  int32_t route = -1;  // not flows: its one route (flows: each arrival names its own)
  bool bernoulli = false, onoff = false;
  double load = 0;
  double log1p_minus_load = 0;  // log1p(-load): the same float every frame, computed once
  int64_t backlog = 0;
  double next_arrival = INF, on_until = INF, last_send = -INF;
  int64_t send_version = 0, timer_version = 0;
  double timer_at = NONE;
  double timer_queued = INF;  // its earliest TIMER event in the heap (schedule_timer)
  int64_t sent_frames = 0, window_bytes = 0, delivered_window_bytes = 0;
  double paused_until = 0.0;
  FlowTurns flows;
  double link_free_at = 0.0;
  double next_cnp_s = -INF;  // DCQCN: its receiver's NP sends it no CNP before this
};

/// The flows workload: one flow, from its start on (its record's fields too).
struct Flow {
  // record
  int32_t source = 0, destination = 0;
  int64_t size_bytes = 0;
  double start_s = 0, finish_s = std::numeric_limits<double>::quiet_NaN();
  int64_t retransmitted_frames = 0;
  // state
  bool active = false;
  int64_t frames = 0, last_frame_bytes = 0;
  bool has_rules = false;
  Rp rules;
  int32_t route = 0, first_hop = 0;
  int32_t first_port = 0;  // its first hop's port: read with the record, not one load on
  int64_t next_frame = 0;
  IdDeque resend;
  int64_t delivered = 0;
  double last_send = -INF;
  int64_t last_bits = 0;
  int64_t timer_version = 0;
  double timer_at = NONE;
  double timer_queued = INF;  // its earliest TIMER event in the heap (schedule_timer)
  std::vector<double> acked_at;
  double next_cnp_s = -INF;  // DCQCN: its receiver's NP sends it no CNP before this
  bool has_frames() const { return next_frame < frames || !resend.empty(); }
  int64_t frame_bytes(int64_t index, int64_t full) const {
    return index == frames - 1 ? last_frame_bytes : full;
  }
};

struct Event {
  double t;
  uint32_t kind_src;  // kind << 27 | src
  uint64_t seq;
  int64_t version;
  static Event none() { return Event{INF, 0xffffffffu, 0, 0}; }
};
struct Earlier {
  bool operator()(const Event& a, const Event& b) const {
    bool earlier = a.t < b.t;  // (a flag, not a branch: which of two times is earlier is a coin)
    if (__builtin_expect(a.t == b.t, 0)) {
      earlier = a.kind_src != b.kind_src ? a.kind_src < b.kind_src : a.seq < b.seq;
    }
    return earlier;
  }
};
constexpr int SRC_BITS = 27;
constexpr uint32_t SRC_MASK = (1u << SRC_BITS) - 1;

/// A binary min-heap, popped as Floyd's: the hole left at the root goes down to a leaf
/// along the smaller children, chosen without a branch, and the last entry is sifted up
/// from there (one or two steps: it is a late one).  Sifted with a comparison per level,
/// a pop missed a branch at each level.  The entry past the last holds ``T::none()``,
/// later than every key, so a node's two children are compared without a bound check.
/// Every key is unique (an event's push order), so the order of equal keys is never
/// needed and any correct heap pops what Python's heapq pops.
template <class T, class Less>
struct Heap {
  std::vector<T> v{T::none()};  // n entries, then none()
  size_t n = 0;
  bool empty() const { return n == 0; }
  const T& top() const { return v[0]; }
  void push(const T& x) {
    if (n + 2 > v.size()) v.resize(std::max<size_t>(16, 2 * v.size()), T::none());
    sift_up(n++, x);
  }
  T pop() {
    T* a = v.data();
    T top_ = a[0];
    T last = a[--n];
    a[n] = T::none();
    if (n > 0) fill_root(last);
    return top_;
  }

 private:
  /// The root is a hole: the smaller children move up along one path to a leaf, and x
  /// goes in there and up as far as it belongs.
  void fill_root(const T& x) {
    T* a = v.data();
    Less less;
    size_t i = 0;
    for (size_t c = 1; c < n; c = 2 * i + 1) {
      size_t best = c + less(a[c + 1], a[c]);
      a[i] = a[best];
      i = best;
    }
    sift_up(i, x);
  }
  /// Entry i is a hole: x goes in there and up as far as it belongs.
  void sift_up(size_t i, const T& x) {
    T* a = v.data();
    Less less;
    while (i > 0) {
      size_t parent = (i - 1) >> 1;
      if (!less(x, a[parent])) break;
      a[i] = a[parent];
      i = parent;
    }
    a[i] = x;
  }
};

using EventList = Heap<Event, Earlier>;

/// The earliest of many timed entries, one per member (a port, a source), as a tournament
/// (winner) tree: a leaf per member holds its time (infinity while it has none), each node
/// the earlier of its two children, so the root is the earliest.  A member's change is
/// written from its leaf to the root: the nodes it reads are known before any comparison,
/// so they load together and only the comparisons chain.  A heap chained a dependent load
/// and a missed branch per level: at 1,024 hosts (some 200 ports busy, 500 sends pending)
/// that was half of the core's time.  A key is the time's bits over the member's index,
/// compared as one 128-bit integer: a time is never negative, so its bits order as the
/// time does, and equal times order by the index, as the Python engine's heap does.
struct Tournament {
  using Key = unsigned __int128;
  std::vector<Key> node;  // node[1] is the root; node[leaves + i] is member i's leaf
  size_t leaves = 1;
  static Key key(double t, size_t i) {
    t += 0.0;  // (-0.0 is +0.0 here: its bits would order it last)
    uint64_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    return (static_cast<Key>(bits) << 32) | static_cast<uint32_t>(i);
  }
  /// n members, all without a time.
  void reset(size_t n) {
    leaves = 1;
    while (leaves < n) leaves *= 2;
    node.assign(2 * leaves, 0);
    for (size_t i = 0; i < leaves; i++) node[leaves + i] = key(INF, i);
    for (size_t i = leaves - 1; i >= 1; i--) node[i] = std::min(node[2 * i], node[2 * i + 1]);
  }
  void set(size_t member, double t) {
    Key* a = node.data();
    size_t i = leaves + member;
    Key k = key(t, member);
    a[i] = k;
    while (i > 1) {
      Key sibling = a[i ^ 1];
      k = sibling < k ? sibling : k;
      i >>= 1;
      a[i] = k;
    }
  }
  double first_t() const {
    double t;
    uint64_t bits = static_cast<uint64_t>(node[1] >> 32);
    std::memcpy(&t, &bits, sizeof t);
    return t;
  }
  uint32_t first() const { return static_cast<uint32_t>(node[1]); }
};

/// The pending events but for frames landing (Core::wires) and ports' departures
/// (Core::departures), in one order: time, kind, source, then push order.
/// - Timers and retransmissions (a flow's or a source's, due a timer period or a timeout
///   on: thousands pending at 1,024 hosts, and rarely the earliest) have a heap of their
///   own, so the events popped nearly every time sift through a smaller one.
/// - SEND events, which each source keeps pending nearly always, are not in a heap: a
///   source's newest is in a slot of its own, the slots ordered by a tournament.  An older
///   one still pending (superseded by a rate change: its version is stale) moves to the
///   heap when a newer one is pushed, so every event is still popped, in the same order:
///   only such a pair can tie on time, kind and source, and the older, the heap's, wins.
struct Pending {
  struct Slot {
    double t = INF;
    uint64_t seq = 0;
    int64_t version = 0;
  };
  enum From : uint8_t { NONE, HEAP, FAR, SENDS };
  struct Head {
    double t = INF;
    uint32_t kind_src = 0xffffffffu;
    From from = NONE;
  };
  EventList heap, far;
  std::vector<Slot> sends;  // by source
  Tournament send_order;
  uint64_t seq = 0;

  void reset(size_t sources) {
    sends.assign(sources, Slot{});
    send_order.reset(sources);
  }
  void push(double t, int kind, int64_t src, int64_t version) {
    if (src < 0 || static_cast<uint64_t>(src) > SRC_MASK) throw std::overflow_error("event source");
    seq++;
    uint32_t kind_src = (static_cast<uint32_t>(kind) << SRC_BITS) | static_cast<uint32_t>(src);
    if (kind == SEND) {
      size_t si = static_cast<size_t>(src);
      if (si >= sends.size()) throw std::out_of_range("a SEND for no source");
      Slot& slot = sends[si];
      if (slot.t != INF) heap.push(Event{slot.t, kind_src, slot.seq, slot.version});
      slot = Slot{t, seq, version};
      send_order.set(si, t);
    } else if (kind == TIMER || kind == RETRANSMIT) {
      far.push(Event{t, kind_src, seq, version});
    } else {
      heap.push(Event{t, kind_src, seq, version});
    }
  }
  Head head() const {
    Head h;
    if (!heap.empty()) h = Head{heap.top().t, heap.top().kind_src, HEAP};
    if (!far.empty() && (h.from == NONE || Earlier()(far.top(), heap.top()))) {
      h = Head{far.top().t, far.top().kind_src, FAR};
    }
    double t = send_order.first_t();
    uint32_t ks = (static_cast<uint32_t>(SEND) << SRC_BITS) | send_order.first();
    if (t < h.t || (t == h.t && t != INF && ks < h.kind_src)) h = Head{t, ks, SENDS};
    return h;
  }
  /// Removes the event head() found.  A SEND from the slots leaves its source's slot
  /// empty and its leaf as it was, for settle() after the event, which often fills the
  /// slot again: one walk to the root instead of two.
  Event take(const Head& h) {
    if (h.from == HEAP) return heap.pop();
    if (h.from == FAR) return far.pop();
    Slot& slot = sends[h.kind_src & SRC_MASK];
    Event e{slot.t, h.kind_src, slot.seq, slot.version};
    slot.t = INF;
    return e;
  }
  void settle(const Head& h) {
    if (h.from != SENDS) return;
    size_t si = h.kind_src & SRC_MASK;
    if (sends[si].t == INF) send_order.set(si, INF);
  }
};

// -- the engine --------------------------------------------------------------------------------

struct Core {
  // configuration
  double end = 0, sample_interval_s = 1e-3;
  int64_t frame_bytes = 1500, frame_bits = 12000, q_unit = 1;
  static int64_t bits_of(const Port& port, int64_t bytes) {
    return port.paced ? port.service_bits : 8 * bytes;
  }
  /// When the first frame of an idle port leaves (Simulation._first_departure).
  double first_departure(Port& port) const {
    if (port.paced) return std::max(now, port.last_depart + port.service_bits / port.rate_bps);
    return now + 8 * port.queue.front().bytes / port.rate_bps;
  }
  bool qcn = true, pause = false, three_point = false, flow_mode = false;
  bool cp_at_departure = false, left_behind = false;
  int64_t pause_hi_bytes = 0, pause_lo_bytes = 0;
  double stagger_s = 0, mean_on_s = 0, mean_off_s = 0, rto_s = 0;
  double cnp_interval_s = 0;  // DCQCN: a notification point's least gap between CNPs
  CpConfig cp_cfg;
  std::deque<CpConfig> port_cfgs;  // ports' own, changed mid-run (set_port_cp)
  RpParams rp;
  std::vector<double> rates;
  std::vector<double> rate_times;
  int32_t bottleneck = 0;
  std::vector<int32_t> measured;
  // arrivals (flows)
  std::vector<double> arr_start;
  std::vector<int32_t> arr_source, arr_destination, arr_route;
  std::vector<int64_t> arr_size, arr_frames, arr_last;

  // state
  MT rng;
  double now = 0;
  std::vector<Port> ports;
  // Each port's reflection stream, by port (three-point runs draw from it; its CP's stream
  // is the CP's own).
  std::vector<MT> reflect_rands;
  // Each marking port's ECN stream, by port (DCQCN); none for the others, which would
  // each hold a stream's 2.5 KB for nothing.
  std::vector<std::unique_ptr<MT>> ecn_rands;
  std::vector<Input> inputs;
  std::vector<Source> sources;
  std::vector<Route> routes;
  std::vector<Hop> hops;
  std::vector<Flow> flows;
  // Each flow's next_eligible (simulator/engine.py: ActiveFlow.next_eligible), apart from
  // its record: a source's turn reads it for each of its flows until one may send.
  std::vector<double> eligible;
  Pending pending;
  std::vector<Wire> wires;  // ARRIVE events: one FIFO per link delay
  Tournament departures;  // the ports' next departures (infinity: idle)
  void depart_at(int32_t pi, double t) { departures.set(static_cast<size_t>(pi), t); }
  size_t rate_next = 0;
  int64_t events = 0, drops = 0, cnms = 0, cnps = 0;
  std::vector<std::pair<std::string, int64_t>> extra;
  bool started = false, finished = false;

  // samples
  std::vector<double> s_times, s_throughput, s_capacity;
  std::vector<int64_t> s_queue, s_drops;
  std::vector<double> s_src_current, s_src_target, s_src_throughput, s_src_delivered;
  std::vector<std::vector<int64_t>> s_port_queue, s_port_drops, s_port_cnms;
  std::vector<std::vector<double>> s_port_throughput;

  void count_extra(const char* key) {
    for (auto& kv : extra) {
      if (kv.first == key) {
        kv.second++;
        return;
      }
    }
    extra.emplace_back(key, 1);
  }

  void push(double t, int kind, int64_t src = 0, int64_t version = 0) {
    pending.push(t, kind, src, version);
  }

  // -- the offered load --

  void arrivals_until(Source& s, double t) {
    double slot_s = s.slot_s;
    while (s.next_arrival <= t) {
      if (s.onoff && s.next_arrival > s.on_until) {
        double off = rng.expovariate(1 / mean_off_s);
        double start = s.on_until + off;
        s.on_until = start + rng.expovariate(1 / mean_on_s);
        s.next_arrival = start;
        continue;
      }
      s.backlog += 1;
      if (s.bernoulli) {
        double u = 1.0 - rng.random();
        double empty = s.load >= 1.0 ? 0.0 : std::floor(std::log(u) / s.log1p_minus_load);
        s.next_arrival += slot_s * (1 + empty);
      } else {
        s.next_arrival += frame_bits / s.offered_bps;
      }
    }
  }

  // -- events --

  void send(int32_t si) {
    Source& s = sources[si];
    if (now < s.paused_until) {
      push(s.paused_until, SEND, si, s.send_version);
      return;
    }
    if (s.next_arrival <= now) arrivals_until(s, now);
    if (s.backlog == 0) {
      push(pmax(s.next_arrival, now), SEND, si, s.send_version);
      return;
    }
    s.backlog -= 1;
    s.last_send = now;
    s.sent_frames += 1;
    s.window_bytes += frame_bytes;
    double gap;
    if (s.has_rules) {
      Rp& rules = s.rules;
      rules.on_transmit(frame_bytes, 1, rng);
      if (rules.timer_deadline != s.timer_at) schedule_timer_source(si);
      double rate = rules.current_rate_bps;
      gap = rate < s.line_rate_bps ? frame_bits / rate : s.slot_s;
    } else {
      gap = s.slot_s;
    }
    int32_t first = routes[s.route].first;
    Frame f{si, 0, static_cast<int32_t>(frame_bytes), 0, first, Tag{}};
    arrive(hops[first].port, f);
    double due = now + gap;
    if (s.backlog == 0 && s.next_arrival > due) due = s.next_arrival;
    push(due, SEND, si, s.send_version);
  }

  void arrive(int32_t pi, const Frame& arriving) {
    Frame frame = arriving;
    Port& port = ports[pi];
    const Hop& hop = hops[frame.hop];
    int64_t q = static_cast<int64_t>(port.queue.size());
    bool full = false;
    if (pause) {
      // (A frame its input's partition has no room for never reaches the port's CP.)
      Input& inp = inputs[hop.input];
      if (inp.buffered_bytes + frame.bytes > inp.partition_bytes) {
        drop(port);
        return;
      }
      inp.buffered_bytes += frame.bytes;
      if (inp.buffered_bytes > pause_hi_bytes) send_pause(hop.input, pi);
    } else {
      full = q >= port.buffer_pkts;
    }
    frame.q = static_cast<int32_t>(q);
    // The CP judges the arriving frame before the tail drop (cp.judge = "arrivals"), or only
    // one the buffer admits; a port marking ECN judges the frames it admits, in bytes.
    if (port.arrival_cp && (!full || port.cp.cfg->judge_dropped)) {
      int64_t depth = q_unit == 1 ? q : port.queue_bytes;
      Decision d;
      if (__builtin_expect(port.cp.cfg->ecn, 0)) {
        if (!full && ecn_marks(port.queue_bytes, *port.cp.cfg, *ecn_rands[pi])) {
          port.marks += 1;
          frame.tag.ce = true;
        }
      } else if (three_point) {
        if (port.cp.sample(depth, frame.bytes, d)) {
          Tag out;
          if (overwrite_fb_tag(d, frame.tag, cp_cfg, pi, reflect_rands[pi], out)) {
            frame.tag = out;
            if (out.reflected) {
              port.cp_reflections += 1;
              send_cnm(frame.target, out.qntz_fb, port, hop.cnm_delay_s, CNM);
            }
          }
        }
      } else if (port.cp.sample(depth, frame.bytes, d)) {
        feedback(d, frame.target, port, hop.cnm_delay_s);
      }
    }
    if (full) {
      drop(port);
      if (flow_mode) lose(frame.target, frame.index, routes[hop.route].source);
      return;
    }
    port.queue.push_back(frame);
    port.queue_bytes += frame.bytes;
    if (!port.sending) {
      start(pi);
    }
  }

  void drop(Port& port) {
    drops += 1;
    port.drops += 1;
  }

  void start(int32_t pi) {
    Port& port = ports[pi];
    if (port.paused_until > now) {
      if (port.resume_at != port.paused_until) {
        port.resume_at = port.paused_until;
        push(port.paused_until, RESUME, pi);
      }
      return;
    }
    port.sending = true;
    depart_at(pi, first_departure(port));
  }

  void forward(int32_t pi, const Frame& frame) {
    Port& port = ports[pi];
    if (port.delay_s != 0.0) {
      port.pipe.push_back(frame);
      wires[port.wire].push(now + port.delay_s, pi);
    } else {
      next_hop(frame);
    }
  }

  void next_hop(const Frame& landed) {
    Frame frame = landed;
    frame.hop += 1;
    frame.q = 0;
    arrive(hops[frame.hop].port, frame);
  }

  void left_partition(int32_t ii, int64_t bytes) {
    Input& inp = inputs[ii];
    inp.buffered_bytes -= bytes;
    if (inp.buffered_bytes < pause_lo_bytes && inp.holds_until > now) {
      inp.holds_until = now;
      push(now + inp.delay_s, PAUSE, ii, 0);
    }
  }

  void send_pause(int32_t ii, int32_t pi) {
    Input& inp = inputs[ii];
    Port& port = ports[pi];
    double arrives = now + inp.delay_s;
    if (arrives < inp.holds_until) return;
    double drain_s =
        (port.paced ? static_cast<int64_t>(port.queue.size()) * port.service_bits
                    : 8 * port.queue_bytes) /
        port.rate_bps;
    double ceil_ = std::ceil(drain_s / inp.quantum_s);
    int64_t quanta = ceil_ >= 65535.0 ? 65535 : std::max<int64_t>(1, static_cast<int64_t>(ceil_));
    inp.holds_until = arrives + quanta * inp.quantum_s;
    inp.pauses += 1;
    push(arrives, PAUSE, ii, quanta);
  }

  void on_pause(int32_t si, int64_t quanta) {
    Source& s = sources[si];
    if (quanta) {
      s.paused_until = now + quanta * s.quantum_s;
      return;
    }
    s.paused_until = now;
    s.send_version += 1;
    push(now, SEND, si, s.send_version);
  }

  void pause_port(int32_t pi, int64_t quanta, double quantum_s) {
    Port& port = ports[pi];
    if (quanta) {
      port.paused_until = now + quanta * quantum_s;
      return;
    }
    port.paused_until = now;
    if (!port.sending && !port.queue.empty()) start(pi);
  }

  // -- CNMs and reflection --

  void feedback(const Decision& d, int32_t target, Port& port, double delay_s) {
    if (d.cnm()) send_cnm(target, d.qntz_fb, port, delay_s, d.positive ? CNM_POSITIVE : CNM);
  }

  void send_cnm(int32_t target, int qntz_fb, Port& port, double delay_s, int kind) {
    cnms += 1;
    port.cnms += 1;
    if (kind == CNM) port.qntz_counts[qntz_fb] += 1;
    push(now + delay_s, kind, target, qntz_fb);
  }

  void end_reflect(int32_t pi, int32_t target, double delay_s, const Tag& tag) {
    Port& port = ports[pi];
    Tag out;
    if (end_reflection(tag, cp_cfg, pi, reflect_rands[pi], out)) {
      if (out.qntz_fb) {
        port.fb_reflections += 1;
        count_extra("fb_reflections");
      } else {
        port.p0_reflections += 1;
        count_extra("p0_reflections");
      }
      send_cnm(target, out.qntz_fb, port, delay_s, CNM);
    }
  }

  /// Simulation._notify: DCQCN's notification point, for a CE frame leaving its last port
  /// now (its link ``delay_s`` to the receiver); the CNP takes the acknowledgement's way.
  template <class Owner>
  void notify(Owner& o, int32_t target, double delay_s, double ack_after_depart_s) {
    double at = now + delay_s;
    if (at < o.next_cnp_s) return;
    o.next_cnp_s = at + cnp_interval_s;
    cnps += 1;
    push(now + ack_after_depart_s, CNP, target);
  }

  // -- limiters: a source's (index) or a flow's (flow id) --

  void rate_changed_source(int32_t si) {
    Source& s = sources[si];
    s.send_version += 1;
    double rate_bps = s.has_rules ? s.rules.current_rate_bps : INF;
    double gap = frame_bits / pmin(rate_bps, s.line_rate_bps);
    push(pmax(now, s.last_send + gap), SEND, si, s.send_version);
  }

  void rate_changed_flow(int32_t fi) {
    Flow& f = flows[fi];
    int32_t si = routes[f.route].source;
    Source& s = sources[si];
    double rate = pmin(f.rules.current_rate_bps, s.line_rate_bps);
    eligible[fi] = f.last_send + f.last_bits / rate;
    kick(si);
  }

  /// A reaction point's timer event at its new deadline (a source's or a flow's:
  /// ``index`` is the event's target), unless one of its events is due earlier: that one,
  /// found stale, pushes the deadline then (Simulation._schedule_timer).
  template <class Owner>
  void schedule_timer(Owner& o, int32_t index) {
    double deadline = o.rules.timer_deadline;
    if (!is_none(deadline) && deadline != o.timer_at) {
      o.timer_at = deadline;
      o.timer_version += 1;
      if (deadline <= o.timer_queued) {
        o.timer_queued = deadline;
        push(deadline, TIMER, index, o.timer_version);
      }
    }
  }
  /// A timer's event (Simulation._timer_event): it fires if it is the latest; a stale one
  /// pushes the later deadline if no event of the timer's is due before it.
  template <class Owner>
  void timer_event(Owner& o, int32_t index, double t, int64_t version, bool changed_flow) {
    if (t == o.timer_queued) o.timer_queued = INF;
    if (version == o.timer_version) {
      o.timer_at = NONE;
      if (o.rules.advance(t, rng)) {
        if (changed_flow) rate_changed_flow(index);
        else rate_changed_source(index);
      }
      schedule_timer(o, index);
    } else if (!is_none(o.timer_at) && t < o.timer_at && o.timer_at < o.timer_queued) {
      o.timer_queued = o.timer_at;
      push(o.timer_at, TIMER, index, o.timer_version);
    }
  }
  void schedule_timer_source(int32_t si) { schedule_timer(sources[si], si); }
  void schedule_timer_flow(int32_t fi) { schedule_timer(flows[fi], fi); }

  // -- flows --

  void flow_arrives(int64_t number) {
    int32_t si = arr_source[number];
    Source& s = sources[si];
    if (static_cast<size_t>(number) != flows.size()) throw std::logic_error("flows out of order");
    flows.emplace_back();
    Flow& f = flows.back();
    f.source = si;
    f.destination = arr_destination[number];
    f.size_bytes = arr_size[number];
    f.start_s = now;
    f.active = true;
    f.frames = arr_frames[number];
    f.last_frame_bytes = arr_last[number];
    f.route = arr_route[number];
    f.first_hop = routes[f.route].first;
    f.first_port = hops[f.first_hop].port;
    eligible.push_back(now);
    if (qcn) {
      f.has_rules = true;
      f.rules.init(&rp);
    }
    if (pause) f.acked_at.assign(f.frames, INF);
    int32_t fi = static_cast<int32_t>(number);
    s.flows.push_back(fi);
    kick(si);
    if (static_cast<size_t>(number + 1) < arr_start.size()) {
      push(arr_start[number + 1], FLOW, 0, number + 1);
    }
  }

  void send_flows(int32_t si) {
    Source& s = sources[si];
    FlowTurns& fl = s.flows;
    if (now < s.paused_until) {
      push(s.paused_until, SEND, si, s.send_version);
      return;
    }
    bool found = false;
    for (size_t k = 0, n = fl.size(); k < n; k++) {
      if (eligible[fl[0]] <= now) {
        found = true;
        break;
      }
      fl.rotate_left();
    }
    if (!found) {
      if (!fl.empty()) {
        double soonest = eligible[fl[0]];
        for (size_t k = 1; k < fl.size(); k++) soonest = pmin(soonest, eligible[fl[k]]);
        push(soonest, SEND, si, s.send_version);
      }
      return;
    }
    int32_t fi = fl.pop_front();
    Flow& f = flows[fi];
    int64_t index;
    if (!f.resend.empty()) {
      index = f.resend.pop_front();
    } else {
      index = f.next_frame;
      f.next_frame += 1;
    }
    if (f.has_frames()) fl.push_back(fi);
    int64_t fbytes = f.frame_bytes(index, frame_bytes);
    int64_t fbits = 8 * fbytes;
    s.sent_frames += 1;
    s.window_bytes += fbytes;
    double rate = s.line_rate_bps;
    if (f.has_rules) {
      f.rules.on_transmit(fbytes, 1, rng);
      if (f.rules.timer_deadline != f.timer_at) schedule_timer_flow(fi);
      rate = pmin(rate, f.rules.current_rate_bps);
    }
    f.last_send = now;
    f.last_bits = fbits;
    eligible[fi] = now + fbits / rate;
    s.link_free_at = now + fbits / s.line_rate_bps;
    if (pause) lose(fi, index, si);
    Frame frame{fi, 0, static_cast<int32_t>(fbytes), static_cast<int32_t>(index), f.first_hop,
                Tag{}};
    arrive(f.first_port, frame);
    push(s.link_free_at, SEND, si, s.send_version);
  }

  void kick(int32_t si) {
    Source& s = sources[si];
    s.send_version += 1;
    push(pmax(now, s.link_free_at), SEND, si, s.send_version);
  }

  /// _lose: the frame is due again at its timeout (the event carries the flow and frame).
  void lose(int32_t fi, int64_t index, int32_t si) {
    push(now + rto_s, RETRANSMIT, si, (static_cast<int64_t>(fi) << 32) | index);
  }

  void retransmit(int32_t si, int64_t token) {
    int32_t fi = static_cast<int32_t>(token >> 32);
    int64_t index = token & 0xffffffffLL;
    Flow& f = flows[fi];
    if (pause && (!f.active || f.acked_at[index] <= now)) return;
    f.retransmitted_frames += 1;
    if (!f.has_frames()) sources[si].flows.push_back(fi);
    f.resend.push_back(static_cast<int32_t>(index));
    kick(si);
  }

  void delivered(int32_t fi, int64_t index, int64_t fbytes, double at, const Tag& tag) {
    Flow& f = flows[fi];
    const Route& route = routes[f.route];
    const Hop& last = hops[route.last];
    if (three_point) end_reflect(last.port, fi, last.cnm_delay_s, tag);
    if (pause) {
      if (!f.active || f.acked_at[index] != INF) return;
      f.acked_at[index] = at + route.ack_after_depart_s;
    }
    sources[route.source].delivered_window_bytes += fbytes;
    f.delivered += 1;
    if (f.delivered == f.frames) {
      f.finish_s = at + ports[last.port].delay_s;
      f.active = false;
      // Nothing of a finished flow is read again but its record.
      std::vector<double>().swap(f.acked_at);
      f.resend = IdDeque();
    }
  }

  // -- samples --

  double current_rate(const Source& s) const {
    double line = s.line_rate_bps;
    if (flow_mode) {
      bool any = false;
      double lowest = 0;
      for (size_t k = 0; k < s.flows.size(); k++) {
        const Flow& f = flows[s.flows[k]];
        if (!f.has_rules) continue;
        double r = f.rules.current_rate_bps;
        lowest = any ? pmin(lowest, r) : r;
        any = true;
      }
      return any ? lowest : line;
    }
    return pmin(s.has_rules ? s.rules.current_rate_bps : INF, line);
  }

  void sample() {
    double dt = sample_interval_s;
    const Port& b = ports[bottleneck];
    s_times.push_back(now);
    s_queue.push_back(static_cast<int64_t>(b.queue.size()));
    s_drops.push_back(drops);
    s_throughput.push_back(8 * b.window_bytes / dt);
    s_capacity.push_back(b.rate_bps);
    for (const Source& s : sources) {
      s_src_current.push_back(current_rate(s));
      s_src_target.push_back(s.has_rules ? s.rules.target_rate_bps
                                         : std::numeric_limits<double>::quiet_NaN());
      s_src_throughput.push_back(8 * s.window_bytes / dt);
      s_src_delivered.push_back(8 * s.delivered_window_bytes / dt);
    }
    for (size_t k = 0; k < measured.size(); k++) {
      const Port& p = ports[measured[k]];
      s_port_queue[k].push_back(static_cast<int64_t>(p.queue.size()));
      s_port_throughput[k].push_back(8 * p.window_bytes / dt);
      s_port_drops[k].push_back(p.drops);
      s_port_cnms[k].push_back(p.cnms);
    }
    for (Port& p : ports) p.window_bytes = 0;
    for (Source& s : sources) {
      s.window_bytes = 0;
      s.delivered_window_bytes = 0;
    }
  }

  // -- a live view (qcn.core.live) --

  /// Simulation.set_port_cp: port ``pi``'s CP takes ``cfg`` from now on.  Each port given
  /// its own configuration keeps it in ``port_cfgs`` (a deque: its elements never move).
  void set_port_cp(int32_t pi, const CpConfig& cfg) {
    Port& p = ports.at(static_cast<size_t>(pi));
    if (!p.has_cp) throw std::invalid_argument("the port runs no CP");
    if (started && cfg.ecn && !ecn_rands[pi]) {
      throw std::invalid_argument("the port has no ECN stream: whether it marks is fixed");
    }
    port_cfgs.push_back(cfg);
    p.cp.reconfigure(&port_cfgs.back());
  }

  /// Simulation.live_row's fields, in its order.
  py::tuple live_row() const {
    py::list queue, port_cnms, current, target, qntz;
    std::array<int64_t, QNTZ_FB_MAX + 1> counts{};
    for (int32_t pi : measured) {
      queue.append(static_cast<int64_t>(ports[pi].queue.size()));
      port_cnms.append(ports[pi].cnms);
    }
    for (const Port& p : ports) {
      for (size_t k = 0; k < counts.size(); k++) counts[k] += p.qntz_counts[k];
    }
    for (int64_t c : counts) qntz.append(c);
    for (const Source& s : sources) {
      current.append(current_rate(s));
      target.append(s.has_rules ? s.rules.target_rate_bps
                                : std::numeric_limits<double>::quiet_NaN());
    }
    return py::make_tuple(now, py::tuple(queue), py::tuple(port_cnms), drops, py::tuple(current),
                          py::tuple(target), py::tuple(qntz));
  }

  // -- the loop --

  void begin() {
    for (size_t pi = 0; pi < ports.size(); pi++) {
      if (ports[pi].has_cp && ports[pi].cp.cfg->ecn && !ecn_rands[pi]) {
        throw std::logic_error("a port marks ECN without its stream (add_port's ecn_state)");
      }
    }
    pending.reset(sources.size());
    s_port_queue.assign(measured.size(), {});
    s_port_throughput.assign(measured.size(), {});
    s_port_drops.assign(measured.size(), {});
    s_port_cnms.assign(measured.size(), {});
    for (size_t i = 0; i < sources.size(); i++) {
      Source& s = sources[i];
      double start_ = static_cast<double>(i) * stagger_s;
      s.next_arrival = start_;
      if (s.onoff) s.on_until = start_ + rng.expovariate(1 / mean_on_s);
      if (!flow_mode) push(start_, SEND, static_cast<int64_t>(i), 0);
    }
    if (!arr_start.empty()) push(arr_start[0], FLOW, 0, 0);
    for (double at : rate_times) push(at, RATE, 0, 0);
    push(sample_interval_s, SAMPLE);
    departures.reset(ports.size());
  }

  /// Runs until the end (true) or until a sample's callback asks to stop (false); a Python
  /// exception from the callback (Ctrl-C: KeyboardInterrupt) propagates, the state kept.
  bool run(const py::object& progress) {
    if (!started) {
      begin();
      started = true;
    }
    if (finished) return true;
    bool have_progress = !progress.is_none();
    for (;;) {
      // The earliest pending event: the pending list's and the wires' first ones, in one
      // order (time, kind, source; push order within a list), and the next departure.
      const Pending::Head head = pending.head();
      double head_t = head.t;
      uint32_t head_kind_src = head.kind_src;
      Wire* landing = nullptr;
      for (Wire& w : wires) {
        if (w.empty()) continue;
        const Wire::Landing& l = w.front();
        uint32_t ks = (static_cast<uint32_t>(ARRIVE) << SRC_BITS) | static_cast<uint32_t>(l.port);
        if (l.t < head_t || (l.t == head_t && ks < head_kind_src)) {
          head_t = l.t;
          head_kind_src = ks;
          landing = &w;
        }
      }
      if (head.from == Pending::NONE && landing == nullptr) break;
      double depart = departures.first_t();
      if (depart < head_t || (depart == head_t && (head_kind_src >> SRC_BITS) > DEPART)) {
        if (depart > end) break;
        now = depart;
        events += 1;
        int32_t pi = static_cast<int32_t>(departures.first());
        Port& port = ports[pi];
        port.last_depart = depart;
        Frame frame = port.queue.pop_front();
        const Hop& hop = hops[frame.hop];
        port.queue_bytes -= frame.bytes;
        port.window_bytes += frame.bytes;
        if (pause) left_partition(hop.input, frame.bytes);
        if (cp_at_departure && port.has_cp) {
          int64_t q = left_behind ? static_cast<int64_t>(port.queue.size()) : frame.q;
          Decision d;
          if (port.cp.sample(q, frame_bytes, d)) {
            feedback(d, frame.target, port, hop.cnm_delay_s);
          }
        }
        if (!port.queue.empty() && port.paused_until <= depart) {
          double then = depart + bits_of(port, port.queue.front().bytes) / port.rate_bps;
          depart_at(pi, then);
        } else {
          port.sending = false;
          depart_at(pi, INF);
          if (!port.queue.empty()) start(pi);
        }
        if (!hop.last) {
          forward(pi, frame);
        } else if (flow_mode) {
          if (frame.tag.ce) {
            notify(flows[frame.target], frame.target, port.delay_s,
                   routes[hop.route].ack_after_depart_s);
          }
          delivered(frame.target, frame.index, frame.bytes, depart, frame.tag);
        } else {
          const Route& route = routes[hop.route];
          if (frame.tag.ce) {
            notify(sources[route.source], route.source, port.delay_s, route.ack_after_depart_s);
          }
          sources[route.source].delivered_window_bytes += frame.bytes;
          if (three_point) end_reflect(pi, frame.target, hop.cnm_delay_s, frame.tag);
        }
        continue;
      }
      if (landing != nullptr) {
        if (head_t > end) break;
        now = head_t;
        events += 1;
        int32_t pi = landing->front().port;
        landing->landings.pop_front();
        next_hop(ports[pi].pipe.pop_front());
        continue;
      }
      Event e = pending.take(head);
      if (e.t > end) {
        pending.settle(head);
        break;
      }
      now = e.t;
      events += 1;
      int kind = static_cast<int>(e.kind_src >> SRC_BITS);
      int32_t src = static_cast<int32_t>(e.kind_src & SRC_MASK);
      switch (kind) {
        case SEND: {
          Source& s = sources[src];
          if (e.version == s.send_version) {
            if (flow_mode) send_flows(src);
            else send(src);
          }
          pending.settle(head);
          break;
        }
        case CNM:
        case CNM_POSITIVE: {
          bool positive = kind == CNM_POSITIVE;
          if (flow_mode) {
            Flow& f = flows[src];
            if (!f.active) {
              count_extra("cnms_after_finish");
              break;
            }
            f.rules.on_cnm(static_cast<int>(e.version), positive, now, rng);
            schedule_timer_flow(src);
            rate_changed_flow(src);
          } else {
            sources[src].rules.on_cnm(static_cast<int>(e.version), positive, now, rng);
            schedule_timer_source(src);
            rate_changed_source(src);
          }
          break;
        }
        case CNP: {  // (a CNP carries no feedback: DCQCN's cut is alpha's)
          if (flow_mode) {
            Flow& f = flows[src];
            if (!f.active) {
              count_extra("cnps_after_finish");
              break;
            }
            f.rules.on_cnm(0, false, now, rng);
            schedule_timer_flow(src);
            rate_changed_flow(src);
          } else {
            sources[src].rules.on_cnm(0, false, now, rng);
            schedule_timer_source(src);
            rate_changed_source(src);
          }
          break;
        }
        case TIMER: {
          if (flow_mode) {
            Flow& f = flows[src];
            if (f.active && f.has_rules) timer_event(f, src, e.t, e.version, true);
          } else {
            Source& s = sources[src];
            if (s.has_rules) timer_event(s, src, e.t, e.version, false);
          }
          break;
        }
        case PAUSE: {
          Input& inp = inputs[src];
          if (inp.source >= 0) on_pause(inp.source, e.version);
          else pause_port(inp.upstream, e.version, inp.quantum_s);
          break;
        }
        case RESUME: {
          Port& port = ports[src];
          if (!port.sending && !port.queue.empty()) start(src);
          break;
        }
        case FLOW:
          flow_arrives(e.version);
          break;
        case RETRANSMIT:
          retransmit(src, e.version);
          break;
        case RATE:
          ports[bottleneck].rate_bps = rates.at(rate_next++);
          break;
        case SAMPLE: {
          sample();
          push(e.t + sample_interval_s, SAMPLE);
          if (PyErr_CheckSignals() != 0) throw py::error_already_set();
          if (have_progress) progress(e.t, end);
          break;
        }
        default:
          throw std::logic_error("unknown event kind");
      }
    }
    finished = true;
    return true;
  }
};

// -- Python bindings -------------------------------------------------------------------------

std::vector<uint64_t> state_of(const py::object& random_state) {
  // random.Random.getstate(): (3, (625 integers), None)
  py::tuple st = random_state.cast<py::tuple>();
  return st[1].cast<std::vector<uint64_t>>();
}

template <class T>
T get(const py::dict& d, const char* key) {
  return d[key].cast<T>();
}

CpConfig cp_config(const py::object& cfg) {
  CpConfig c;
  c.q_eq = cfg.attr("q_eq").cast<int64_t>();
  c.w_fixed = cfg.attr("w_fixed").cast<int64_t>();
  c.fbmax_fixed = cfg.attr("fbmax_fixed").cast<int64_t>();
  c.fb_multiplier = cfg.attr("fb_multiplier").cast<int64_t>();
  c.p_base_fixed = cfg.attr("p_base_fixed").cast<int64_t>();
  c.p_scale_fixed = cfg.attr("p_scale_fixed").cast<int64_t>();
  c.bernoulli = cfg.attr("sampling").attr("value").cast<std::string>() == "bernoulli";
  for (const auto& row : cfg.attr("intervals")) {
    c.intervals.emplace_back(row.attr("base_bytes").cast<int64_t>(),
                             row.attr("jitter_span_bytes").cast<int64_t>());
  }
  c.positive_feedback = cfg.attr("positive_feedback").cast<bool>();
  c.three_point = cfg.attr("three_point").cast<bool>();
  c.judge_dropped = cfg.attr("judge_dropped").cast<bool>();
  c.reflect_p_base_fixed = cfg.attr("reflect_p_base_fixed").cast<int64_t>();
  c.reflect_p_scale_fixed = cfg.attr("reflect_p_scale_fixed").cast<int64_t>();
  c.p0_fixed = cfg.attr("p0_fixed").cast<int64_t>();
  c.ecn = cfg.attr("signal").attr("value").cast<std::string>() == "ecn";
  c.kmin_bytes = cfg.attr("kmin_bytes").cast<int64_t>();
  c.kmax_bytes = cfg.attr("kmax_bytes").cast<int64_t>();
  c.ecn_slope = cfg.attr("ecn_slope").cast<int64_t>();
  return c;
}

RpParams rp_params(const py::dict& d) {
  RpParams p;
  std::string scheme = get<std::string>(d, "scheme");
  if (scheme == "qcn") p.scheme = QCN;
  else if (scheme == "2-qcn") p.scheme = TWO_QCN;
  else if (scheme == "timer-qcn") p.scheme = TIMER_QCN;
  else if (scheme == "ecm") p.scheme = ECM;
  else if (scheme == "dcqcn") p.scheme = DCQCN;
  else throw std::invalid_argument("the compiled core has no rules for the scheme " + scheme);
  p.line_rate_bps = get<double>(d, "line_rate_bps");
  p.min_rate_bps = get<double>(d, "min_rate_bps");
  p.gd = get<double>(d, "gd");
  p.bc_limit_bytes = static_cast<double>(get<int64_t>(d, "bc_limit_bytes"));
  p.timer_s = get<double>(d, "timer_s");
  p.r_ai_bps = get<double>(d, "r_ai_bps");
  p.r_hai_bps = get<double>(d, "r_hai_bps");
  p.jitter = get<double>(d, "jitter");
  p.fast_recovery_th = get<int64_t>(d, "fast_recovery_th");
  p.hai_min_frames = get<int64_t>(d, "hai_min_frames");
  p.frame_bytes = get<int64_t>(d, "frame_bytes");
  p.timer_enabled = get<bool>(d, "timer_enabled");
  p.hai_enabled = get<bool>(d, "hai_enabled");
  p.shorten_cycles_after_fr = get<bool>(d, "shorten_cycles_after_fr");
  p.fb_hat = get<bool>(d, "fb_hat");
  p.positive_reinforcement = get<bool>(d, "positive_reinforcement");
  p.adaptive_timer = get<bool>(d, "adaptive_timer");
  p.timer_expiry_factor = get<double>(d, "timer_expiry_factor");
  p.timer_expiry_step_s = get<double>(d, "timer_expiry_step_s");
  p.timer_cnm_factor = get<double>(d, "timer_cnm_factor");
  p.timer_cnm_step_s = get<double>(d, "timer_cnm_step_s");
  p.adaptive_timer_span = get<double>(d, "adaptive_timer_span");
  p.ecm_gi = get<double>(d, "ecm_gi");
  p.ecm_gd = get<double>(d, "ecm_gd");
  p.ecm_ru_bps = get<double>(d, "ecm_ru_bps");
  p.ecm_rd_bps = get<double>(d, "ecm_rd_bps");
  p.ecm_td_s = get<double>(d, "ecm_td_s");
  p.ecm_fb_max = get<double>(d, "ecm_fb_max");
  p.dcqcn_g = get<double>(d, "dcqcn_g");
  p.dcqcn_alpha_timer_s = get<double>(d, "dcqcn_alpha_timer_s");
  p.dcqcn_alpha_initial = get<double>(d, "dcqcn_alpha_initial");
  return p;
}

/// The core's CP alone, for the differential test.
struct CpModel {
  CpConfig cfg;
  Cp cp;
  MT reflect;
  CpModel(const py::object& config, const py::object& rand_state, const py::object& reflect_state)
      : cfg(cp_config(config)) {
    cp.init(&cfg);
    cp.rand.set_state(state_of(rand_state));
    reflect.set_state(state_of(reflect_state));
  }
  py::object decision(const Decision& d) const {
    return py::make_tuple(d.q, d.qoff, d.qdelta, d.fb_fp, d.qntz_fb, d.sampled, d.positive);
  }
  py::object sample(int64_t q, int64_t frame_bytes) {
    Decision d;
    if (!cp.sample(q, frame_bytes, d)) return py::none();
    return decision(d);
  }
  py::object on_frame(int64_t q, int64_t frame_bytes) {
    Decision d;
    cp.on_frame(q, frame_bytes, d);
    return decision(d);
  }
  static Tag tag_of(const py::tuple& t) {
    Tag tag;
    tag.reflected = t[0].cast<bool>();
    tag.qntz_fb = static_cast<int8_t>(t[1].cast<int>());
    tag.cpid = t[2].cast<int32_t>();
    tag.qoff = t[3].cast<int16_t>();
    tag.qdelta = t[4].cast<int16_t>();
    return tag;
  }
  static py::object tuple_of(const Tag& t) {
    return py::make_tuple(t.reflected, static_cast<int>(t.qntz_fb), t.cpid, t.qoff, t.qdelta);
  }
  /// sample, then (three-point) overwrite_fb_tag with the reflection stream: (decision or
  /// None, the tag it leaves with).
  py::object three_point(int64_t q, int64_t frame_bytes, const py::tuple& tag, int32_t cpid) {
    Decision d;
    Tag in = tag_of(tag);
    if (!cp.sample(q, frame_bytes, d)) return py::make_tuple(py::none(), tag);
    Tag out;
    bool took = overwrite_fb_tag(d, in, cfg, cpid, reflect, out);
    return py::make_tuple(decision(d), took ? tuple_of(out) : py::object(tag));
  }
  py::object end(const py::tuple& tag, int32_t cpid) {
    Tag out;
    if (!end_reflection(tag_of(tag), cfg, cpid, reflect, out)) return py::none();
    return tuple_of(out);
  }
  py::dict state() const {
    py::dict d;
    d["q_old"] = cp.q_old;
    d["bytes_to_sample"] = cp.bytes_to_sample;
    return d;
  }
};

/// The core's RP rules alone, for the differential test.
struct RpModel {
  RpParams params;
  Rp rp;
  MT uniform;
  RpModel(const py::dict& p, const py::object& uniform_state) : params(rp_params(p)) {
    rp.init(&params);
    uniform.set_state(state_of(uniform_state));
  }
  void on_cnm(int qntz_fb, bool positive, double now) { rp.on_cnm(qntz_fb, positive, now, uniform); }
  void on_transmit(int64_t nbytes, int64_t frames) { rp.on_transmit(nbytes, frames, uniform); }
  void on_timer(double now) { rp.on_timer(now, uniform); }
  int64_t advance(double now) { return rp.advance(now, uniform); }
  py::dict state() const {
    py::dict d;
    d["timer_period_s"] = rp.timer_period_s;
    d["current_rate_bps"] = rp.current_rate_bps;
    d["target_rate_bps"] = rp.target_rate_bps;
    d["byte_stage"] = rp.byte_stage;
    d["time_stage"] = rp.time_stage;
    d["bytes_left"] = rp.bytes_left;
    d["timer_deadline"] = is_none(rp.timer_deadline) ? py::object(py::none())
                                                     : py::object(py::float_(rp.timer_deadline));
    d["frames_since_cnm"] = rp.frames_since_cnm;
    d["cnms"] = rp.cnms;
    d["reinforcements"] = rp.reinforcements;
    d["fb_hat"] = rp.fb_hat;
    return d;
  }
  /// DCQCN: (alpha as of the last CNP, its time or None, alpha at ``now``).
  py::tuple alpha(double now) const {
    py::object since = is_none(rp.alpha_since) ? py::object(py::none())
                                               : py::object(py::float_(rp.alpha_since));
    return py::make_tuple(rp.alpha, since, rp.alpha_at(now));
  }
};

/// The core's ECN marking alone, for the differential test: each queue's decision.
std::vector<bool> ecn_marks_of(const py::object& config, const py::object& rand_state,
                               const std::vector<int64_t>& queues) {
  CpConfig cfg = cp_config(config);
  MT rand;
  rand.set_state(state_of(rand_state));
  std::vector<bool> out;
  for (int64_t q : queues) out.push_back(ecn_marks(q, cfg, rand));
  return out;
}

/// The bare event loop in the core's language (bench.sim_bench's baseline): the same heap
/// of the same events, popped and pushed, no model.
double bare_loop(int64_t n, int64_t width) {
  EventList h;
  uint64_t s = 0;
  for (int64_t i = 0; i < width; i++) h.push(Event{i * 1e-7, static_cast<uint32_t>(i), ++s, 0});
  volatile double sink = 0;
  for (int64_t i = 0; i < n; i++) {
    Event e = h.pop();
    h.push(Event{e.t + 1.2e-6, e.kind_src, ++s, e.version});
  }
  sink = h.top().t;
  return sink;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "The simulator's compiled event core (simulator/_core.cpp; docs/simulator.md).";
#define QCN_STR2(x) #x
#define QCN_STR(x) QCN_STR2(x)
#ifdef QCN_CORE_SOURCE_SHA256
  m.attr("source_sha256") = QCN_STR(QCN_CORE_SOURCE_SHA256);
#else
  m.attr("source_sha256") = "";
#endif

  py::class_<Core>(m, "Core")
      .def(py::init<>())
      .def("configure",
           [](Core& c, const py::dict& d) {
             c.end = get<double>(d, "end");
             c.sample_interval_s = get<double>(d, "sample_interval_s");
             c.frame_bytes = get<int64_t>(d, "frame_bytes");
             c.frame_bits = 8 * c.frame_bytes;
             c.q_unit = get<int64_t>(d, "q_unit");
             c.qcn = get<bool>(d, "qcn");
             c.pause = get<bool>(d, "pause");
             c.three_point = get<bool>(d, "three_point");
             c.flow_mode = get<bool>(d, "flow_mode");
             c.cp_at_departure = get<bool>(d, "cp_at_departure");
             c.left_behind = get<bool>(d, "left_behind");
             c.pause_hi_bytes = get<int64_t>(d, "pause_hi_bytes");
             c.pause_lo_bytes = get<int64_t>(d, "pause_lo_bytes");
             c.stagger_s = get<double>(d, "stagger_s");
             c.mean_on_s = get<double>(d, "mean_on_s");
             c.mean_off_s = get<double>(d, "mean_off_s");
             c.rto_s = get<double>(d, "rto_s");
             c.cnp_interval_s = get<double>(d, "cnp_interval_s");
             c.rate_times = get<std::vector<double>>(d, "rate_times");
             c.rates = get<std::vector<double>>(d, "rates");
             c.bottleneck = get<int32_t>(d, "bottleneck");
             c.measured = get<std::vector<int32_t>>(d, "measured");
             c.cp_cfg = cp_config(d["cp_config"]);
             if (c.qcn) c.rp = rp_params(d["rp"].cast<py::dict>());
             c.rng.set_state(state_of(d["rng_state"]));
           })
      .def("add_port",
           [](Core& c, double rate_bps, int64_t buffer_pkts, double delay_s, bool has_cp,
              bool arrival_cp, const py::object& cp_state, const py::object& reflect_state,
              bool paced, int64_t service_bits, const py::object& ecn_state) {
             c.ports.emplace_back();
             Port& p = c.ports.back();
             p.rate_bps = rate_bps;
             p.buffer_pkts = buffer_pkts;
             p.delay_s = delay_s;
             p.has_cp = has_cp;
             p.arrival_cp = arrival_cp;
             p.paced = paced;
             p.service_bits = service_bits;
             c.reflect_rands.emplace_back();
             if (has_cp) p.cp.rand.set_state(state_of(cp_state));
             c.reflect_rands.back().set_state(state_of(reflect_state));
             c.ecn_rands.emplace_back();
             if (!ecn_state.is_none()) {
               c.ecn_rands.back() = std::make_unique<MT>();
               c.ecn_rands.back()->set_state(state_of(ecn_state));
             }
           })
      .def("add_input",
           [](Core& c, int64_t partition_bytes, double delay_s, double quantum_s, int32_t source,
              int32_t upstream) {
             c.inputs.emplace_back();
             Input& i = c.inputs.back();
             i.partition_bytes = partition_bytes;
             i.delay_s = delay_s;
             i.quantum_s = quantum_s;
             i.source = source;
             i.upstream = upstream;
           })
      .def("add_source",
           [](Core& c, bool has_rules, double offered_bps, double line_rate_bps, double slot_s,
              double quantum_s, bool bernoulli, bool onoff, double load,
              int32_t route) {
             c.sources.emplace_back();
             Source& s = c.sources.back();
             s.has_rules = has_rules;
             s.offered_bps = offered_bps;
             s.line_rate_bps = line_rate_bps;
             s.slot_s = slot_s;
             s.quantum_s = quantum_s;
             s.bernoulli = bernoulli;
             s.onoff = onoff;
             s.load = load;
             s.log1p_minus_load = std::log1p(-load);
             s.route = route;
           })
      .def("add_route",
           [](Core& c, int32_t source, std::vector<int32_t> ports, std::vector<int32_t> inputs,
              std::vector<double> cnm_delay_s, double ack_after_depart_s) {
             if (ports.empty() || cnm_delay_s.size() != ports.size() ||
                 !(inputs.empty() || inputs.size() == ports.size())) {
               throw std::invalid_argument("a route's ports, inputs and CNM delays differ");
             }
             int32_t ri = static_cast<int32_t>(c.routes.size());
             c.routes.emplace_back();
             Route& r = c.routes.back();
             r.source = source;
             r.first = static_cast<int32_t>(c.hops.size());
             r.last = r.first + static_cast<int32_t>(ports.size()) - 1;
             r.ack_after_depart_s = ack_after_depart_s;
             for (size_t k = 0; k < ports.size(); k++) {
               Hop h;
               h.cnm_delay_s = cnm_delay_s[k];
               h.port = ports[k];
               h.input = inputs.empty() ? -1 : inputs[k];
               h.route = ri;
               h.last = k + 1 == ports.size();
               c.hops.push_back(h);
             }
           })
      .def("set_arrivals",
           [](Core& c, std::vector<double> start, std::vector<int32_t> source,
              std::vector<int32_t> destination, std::vector<int64_t> size,
              std::vector<int64_t> frames, std::vector<int64_t> last,
              std::vector<int32_t> route) {
             c.arr_start = std::move(start);
             c.arr_source = std::move(source);
             c.arr_destination = std::move(destination);
             c.arr_size = std::move(size);
             c.arr_frames = std::move(frames);
             c.arr_last = std::move(last);
             c.arr_route = std::move(route);
           })
      .def("finish_setup",
           [](Core& c) {
             for (size_t i = 0; i < c.ports.size(); i++) {
               Port& p = c.ports[i];
               int64_t q_old = p.cp.q_old, bts = p.cp.bytes_to_sample;
               p.cp.init(&c.cp_cfg);
               p.cp.q_old = q_old;
               p.cp.bytes_to_sample = bts;
             }
             for (Source& s : c.sources) {
               if (s.has_rules) s.rules.init(&c.rp);
             }
             // A wire for each link delay (a leaf-spine has one or two).
             std::vector<double> delays;
             for (Port& p : c.ports) {
               if (p.delay_s == 0.0) continue;
               auto at = std::find(delays.begin(), delays.end(), p.delay_s);
               p.wire = static_cast<int32_t>(at - delays.begin());
               if (at == delays.end()) delays.push_back(p.delay_s);
             }
             c.wires.resize(delays.size());
           })
      .def("run", &Core::run, py::arg("progress") = py::none())
      .def("set_port_cp",
           [](Core& c, int32_t port, const py::object& cfg) {
             c.set_port_cp(port, cp_config(cfg));
           })
      .def("live_row", &Core::live_row)
      .def_readonly("events", &Core::events)
      .def_readonly("drops", &Core::drops)
      .def_readonly("cnms", &Core::cnms)
      .def_readonly("cnps", &Core::cnps)
      .def_readonly("now", &Core::now)
      .def_readonly("extra", &Core::extra)
      .def("samples",
           [](const Core& c) {
             py::dict d;
             d["times_s"] = c.s_times;
             d["queue_pkts"] = c.s_queue;
             d["drops_so_far"] = c.s_drops;
             d["throughput_bps"] = c.s_throughput;
             d["capacity_bps"] = c.s_capacity;
             d["source_current_rate_bps"] = c.s_src_current;
             d["source_target_rate_bps"] = c.s_src_target;
             d["source_throughput_bps"] = c.s_src_throughput;
             d["source_delivered_bps"] = c.s_src_delivered;
             d["port_queue_pkts"] = c.s_port_queue;
             d["port_throughput_bps"] = c.s_port_throughput;
             d["port_drops_so_far"] = c.s_port_drops;
             d["port_cnms_so_far"] = c.s_port_cnms;
             return d;
           })
      .def("port_counts",
           [](const Core& c) {
             py::list out;
             for (const Port& p : c.ports) {
               out.append(py::make_tuple(p.drops, p.cnms, p.cp_reflections, p.fb_reflections,
                                         p.p0_reflections, static_cast<int64_t>(p.queue.size()),
                                         p.marks));
             }
             return out;
           })
      .def("input_pauses",
           [](const Core& c) {
             std::vector<int64_t> out;
             for (const Input& i : c.inputs) out.push_back(i.pauses);
             return out;
           })
      .def("sent_frames",
           [](const Core& c) {
             std::vector<int64_t> out;
             for (const Source& s : c.sources) out.push_back(s.sent_frames);
             return out;
           })
      .def("flow_results", [](const Core& c) {
        // (start_s, finish_s, retransmitted_frames) of each flow started, in order.
        std::vector<double> start, finish;
        std::vector<int64_t> retx;
        for (const Flow& f : c.flows) {
          start.push_back(f.start_s);
          finish.push_back(f.finish_s);
          retx.push_back(f.retransmitted_frames);
        }
        return py::make_tuple(start, finish, retx);
      });

  py::class_<CpModel>(m, "CpModel")
      .def(py::init<const py::object&, const py::object&, const py::object&>())
      .def("sample", &CpModel::sample)
      .def("on_frame", &CpModel::on_frame)
      .def("three_point", &CpModel::three_point)
      .def("end_reflection", &CpModel::end)
      .def("state", &CpModel::state);

  py::class_<RpModel>(m, "RpModel")
      .def(py::init<const py::dict&, const py::object&>())
      .def("on_cnm", &RpModel::on_cnm)
      .def("on_transmit", &RpModel::on_transmit)
      .def("on_timer", &RpModel::on_timer)
      .def("advance", &RpModel::advance)
      .def("state", &RpModel::state)
      .def("alpha", &RpModel::alpha);

  m.def("ecn_marks", &ecn_marks_of,
        "The core's ECN marking decisions over ``queues`` (bytes), drawing from one stream.");

  m.def(
      "event_order",
      [](const std::vector<std::tuple<double, uint32_t>>& events) {
        // The events' pop order from the core's event heap (push order breaks ties).
        EventList h;
        uint64_t seq = 0;
        for (const auto& [t, kind_src] : events) h.push(Event{t, kind_src, seq++, 0});
        std::vector<int64_t> order;
        while (!h.empty()) order.push_back(static_cast<int64_t>(h.pop().seq));
        return order;
      },
      "The order the event heap pops (time, kind << 27 | source) events in: their indices.");
  m.def(
      "flow_turns",
      [](const std::vector<std::tuple<int, int32_t>>& ops) {
        // A source's ring of flows under (op, id) steps: 0 push_back(id), 1 pop_front,
        // 2 rotate_left; what each pop took, then what is left, front first.
        FlowTurns ring;
        std::vector<int32_t> popped, left;
        for (const auto& [op, id] : ops) {
          if (op == 0) ring.push_back(id);
          else if (ring.empty()) throw std::out_of_range("pop from an empty ring");
          else if (op == 1) popped.push_back(ring.pop_front());
          else ring.rotate_left();
        }
        for (size_t k = 0; k < ring.size(); k++) left.push_back(ring[k]);
        return py::make_tuple(popped, left);
      },
      "A source's ring of flows (its first entries inline) under push/pop/rotate steps.");
  m.def(
      "tournament_order",
      [](size_t members, const std::vector<std::tuple<size_t, double>>& changes) {
        // The root after each change: the earliest (time, member), infinity for none.
        Tournament tree;
        tree.reset(members);
        std::vector<std::tuple<double, uint32_t>> roots;
        for (const auto& [member, t] : changes) {
          if (member >= members) throw std::out_of_range("no such member");
          tree.set(member, t);
          roots.emplace_back(tree.first_t(), tree.first());
        }
        return roots;
      },
      "The tournament's root (time, member) after each (member, time) change.");
  m.def(
      "pending_order",
      [](size_t sources, const std::vector<std::tuple<double, int, int64_t>>& steps) {
        // Each step pushes (time, kind, source), or pops where its time is NaN: the
        // popped events' (time, kind << 27 | source, push number), as Core::run takes them.
        Pending p;
        p.reset(sources);
        std::vector<std::tuple<double, uint32_t, uint64_t>> popped;
        auto pop = [&] {
          Pending::Head h = p.head();
          if (h.from == Pending::NONE) return false;
          Event e = p.take(h);
          p.settle(h);
          popped.emplace_back(e.t, e.kind_src, e.seq);
          return true;
        };
        for (const auto& [t, kind, src] : steps) {
          if (std::isnan(t)) pop();
          else p.push(t, kind, src, 0);
        }
        while (pop()) {
        }
        return popped;
      },
      "The order Core::run takes pending events in: steps push (time, kind, source) or pop.");
  m.def(
      "wire_order",
      [](const std::vector<std::tuple<double, int32_t>>& landings) {
        // The order one wire lands frames in (times that never fall, as frames leave).
        Wire w;
        for (const auto& [t, port] : landings) w.push(t, port);
        std::vector<std::tuple<double, int32_t>> order;
        while (!w.empty()) {
          order.emplace_back(w.front().t, w.front().port);
          w.landings.pop_front();
        }
        return order;
      },
      "The order one wire lands (time, port) frames in.");
  m.def("bare_loop", &bare_loop, py::arg("events"), py::arg("width") = 12,
        "The bare event loop: ``events`` heap pops and pushes of the core's events.");
  m.def("random_stream", [](const py::object& state, int64_t n) {
    // n of random(), for the MT19937 test.
    MT mt;
    mt.set_state(state_of(state));
    std::vector<double> out;
    for (int64_t i = 0; i < n; i++) out.push_back(mt.random());
    return out;
  });
  m.def("randint_stream", [](const py::object& state, int64_t lo, int64_t hi, int64_t n) {
    MT mt;
    mt.set_state(state_of(state));
    std::vector<int64_t> out;
    for (int64_t i = 0; i < n; i++) out.push_back(mt.randint(lo, hi));
    return out;
  });
  m.def("expovariate_stream", [](const py::object& state, double lambd, int64_t n) {
    MT mt;
    mt.set_state(state_of(state));
    std::vector<double> out;
    for (int64_t i = 0; i < n; i++) out.push_back(mt.expovariate(lambd));
    return out;
  });
}
