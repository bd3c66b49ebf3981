// Escaping text for XML (JUnit files) and for the SVG and HTML of the report pages: one rule
// for every markup bucketsim writes.
#pragma once

#include <string>
#include <string_view>

namespace bucketsim {

// Text escaped for XML 1.0 content and attribute values: & < > " ' as entities, tab, newline
// and carriage return as character references, other control characters (which XML 1.0
// cannot hold at all) as U+FFFD.
std::string XmlEscape(std::string_view text);

}  // namespace bucketsim
