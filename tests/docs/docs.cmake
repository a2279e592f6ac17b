# README.md and docs/*.md against the program: their links resolve, every flag they name is an
# option of the command it is used with, and README's first-run commands run as written.
add_test(NAME docs_check COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/docs/docs_check.py $<TARGET_FILE:tandem_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_check PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS quick)
