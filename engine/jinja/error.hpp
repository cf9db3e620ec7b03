#pragma once
/// @file
/// The exception the lexer, parser and evaluator throw inside the library;
/// jinja::compile and jinja::render turn it into an error value, so no
/// exception leaves the library.

#include <string>
#include <utility>

namespace tessera::jinja {

/// A template error; `located` once "line L, column C" is in the message.
struct jinja_error {
  std::string message;
  bool located = false;
  /// raise_exception() in the template: the message is the template's own.
  bool raised = false;
};

[[noreturn]] inline void fail(std::string message) { throw jinja_error{std::move(message)}; }

/// A source position (1-based).
struct position {
  int line = 1;
  int column = 1;
};

/// "line L, column C: msg" once (not on raise_exception's own message).
inline void locate(jinja_error& e, position p) {
  if (e.located || e.raised)
    return;
  e.message = "line " + std::to_string(p.line) + ", column " + std::to_string(p.column) + ": "
              + e.message;
  e.located = true;
}

} // namespace tessera::jinja
