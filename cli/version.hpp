// version.hpp: the tool version and git revision CMake compiles in, with fallbacks for other builds.
#pragma once

#ifndef HEADROOM_VERSION
#define HEADROOM_VERSION "0.0.0"
#endif
#ifndef HEADROOM_GIT_REVISION
#define HEADROOM_GIT_REVISION "unknown"
#endif
