// version.hpp: the tool version (from CMake's project()) and the git revision the binary was built from
// (generated at every build by probes/records/git_revision.cmake; "-dirty" when the tree had uncommitted changes).
#pragma once

#if __has_include("headroom_git_revision.hpp")
#include "headroom_git_revision.hpp"
#endif

#ifndef HEADROOM_VERSION
#define HEADROOM_VERSION "0.0.0"
#endif
#ifndef HEADROOM_GIT_REVISION
#define HEADROOM_GIT_REVISION "unknown"
#endif
