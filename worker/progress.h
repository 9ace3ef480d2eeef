// ProgressLine: the one line that ps_worker redraws in place on a terminal
// (--progress): the step of the total, this worker's samples/s, the mean
// training loss, and the estimated time left.
//
//   step 4120/9370 (44%)  5210 samples/s  loss 0.4321  ETA 1m03s
//
// A pure rule: the reporter (worker/reporter.h) passes in each step and the
// time since training started; nothing here reads a clock or writes to a
// stream. Draw() returns
// the text to write: a carriage return, the line, and spaces over whatever a
// longer previous line left on screen (no newline, no terminal escapes).
//   - samples/s and loss are over the steps since the previous Draw (the
//     loss is the mean of their batch losses), samples/s without the time
//     the run spent evaluating (ExcludeTime);
//   - the time left is the steps left at the run's mean pace so far:
//     (total - step) * elapsed / (step - first_step), evaluations included
//     (they recur in the time left too); unknown ("--") before a step.
// Due() limits redraws to one per kRedrawInterval, and always lets the last
// step draw. Thread-compatible.
//
// ProgressMode and ShowProgress: the --progress flag (auto|on|off) and the
// rule that auto means "when stdout is a terminal". When the line is off the
// worker writes the plain lines it always has.
#ifndef PS_WORKER_PROGRESS_H_
#define PS_WORKER_PROGRESS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ps {

enum class ProgressMode { kAuto, kOn, kOff };

// "auto", "on" or "off"; otherwise INVALID_ARGUMENT naming --progress.
absl::StatusOr<ProgressMode> ParseProgressMode(absl::string_view text);

// Whether to draw the progress line: kOn and kOff as said; kAuto when the
// output is a terminal.
bool ShowProgress(ProgressMode mode, bool output_is_terminal);

// "42s", "12m05s", "3h07m"; "--" for a negative or non-finite duration.
std::string FormatEta(double seconds);

class ProgressLine {
 public:
  static constexpr absl::Duration kRedrawInterval = absl::Milliseconds(250);

  // The run trains steps first_step+1 .. total_steps (first_step > 0 when a
  // sync run resumes at the servers' step); 0 <= first_step <= total_steps.
  ProgressLine(int64_t first_step, int64_t total_steps);

  // After a step: the step reached (steps skipped in sync count as done),
  // the examples this worker trained in it, and its mean batch loss.
  void Step(int64_t step, int64_t samples, double loss);

  // Time spent since the previous Draw on something other than training
  // (an evaluation): it does not count against samples/s (it still does in
  // the time left, as such work recurs).
  void ExcludeTime(absl::Duration spent);

  // Whether a redraw is due at `elapsed` (time since training started):
  // kRedrawInterval after the previous Draw, or at the last step.
  bool Due(absl::Duration elapsed) const;

  // The text that redraws the line at `elapsed`; starts a new window for
  // samples/s and the loss.
  std::string Draw(absl::Duration elapsed);

  // Text that blanks the line and returns to its start, for a plain line
  // written in between; the next Draw redraws the progress. Empty when
  // nothing is on screen.
  std::string Clear();

  // Text that ends the line ("\n"), leaving the last progress on screen, so
  // that what follows starts on a fresh line. Empty when nothing is on
  // screen (before any Draw, or after Clear).
  std::string End();

 private:
  const int64_t first_step_;
  const int64_t total_steps_;
  int64_t step_;
  // Since the previous Draw.
  int64_t window_samples_ = 0;
  double window_loss_sum_ = 0;
  int64_t window_batches_ = 0;
  absl::Duration window_start_ = absl::ZeroDuration();
  double last_loss_ = 0;   // shown when a window has no batch
  double last_rate_ = 0;   // samples/s shown when a window has no time
  size_t width_ = 0;       // characters of the line on screen; 0 = none
};

}  // namespace ps

#endif  // PS_WORKER_PROGRESS_H_
