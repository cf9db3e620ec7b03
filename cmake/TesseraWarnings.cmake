# Warnings for Tessera's own targets: fixed, not silenced (STYLE.md).
function(tessera_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)
endfunction()
