// exit_codes.hpp: the documented exit statuses of `headroom`, so launch scripts can gate on them.
#pragma once

namespace headroom::cli {

inline constexpr int exit_fits = 0;       // the layout fits (plan), a layout fits (--suggest, --min-gpus)
inline constexpr int exit_internal = 1;   // a bug: anything that is not the user's input or the device
inline constexpr int exit_bad_input = 2;  // the input was rejected; one line on stderr says why
inline constexpr int exit_does_not_fit =
    3;                                    // the layout does not fit / nothing fits / no N found / probe OOM
inline constexpr int exit_no_device = 4;  // a GPU backend was asked for and there is no usable device
inline constexpr int exit_device_failed =
    5;  // the device failed: a CUDA call, a block that failed verification, memory not given back
inline constexpr int exit_validation_failed =
    6;  // validate: a prediction contradicts a published outcome; compare: a figure regressed
inline constexpr int exit_output_failed =
    7;  // an output file could not be written (disk full, permissions, a directory or device in the way)

}  // namespace headroom::cli
