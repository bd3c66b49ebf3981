// "Did you mean ...?" for a name the user mistyped: the known name nearest to it by edit
// distance (Levenshtein: insertions, deletions, substitutions; an adjacent swap counts as one,
// as Damerau's variant has it, since "comapre" is one slip, not two). Subcommands, flags and
// policy names all go through this one function, so every suggestion reads the same.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bucketsim {

// Edits that turn `a` into `b` (optimal string alignment distance).
std::size_t EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to `typed`, when it is near enough to be a slip: at most a third of the
// typed length (at least 1, at most 3 edits). Ties go to the earlier candidate.
std::optional<std::string> ClosestName(std::string_view typed,
                                       const std::vector<std::string>& candidates);

// "; did you mean 'NAME'?" or "" when nothing is near: appended to an error message.
std::string DidYouMean(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace bucketsim
