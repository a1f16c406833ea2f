#pragma once
// SQLite as the registry knows it (backends/backend_descriptor.hpp): linked into the executable.

#include <array>

#include "backends/backend_descriptor.hpp"

namespace dblock::sqlite {

inline constexpr std::array<std::string_view, 1> schemes{"sqlite"};
inline constexpr std::array<Strategy, 1> strategies{Strategy::lease};

inline constexpr BackendDescriptor descriptor{"sqlite", schemes, strategies, "", "dblock", '"', false};

}  // namespace dblock::sqlite
