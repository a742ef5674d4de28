"""Per-lesson data for tests/lessons/test_mistakes.py: one module `lessonNN.py` per lesson, each with

- LESSON: the lesson id (the notebook's stem);
- MISTAKES: {description: (test cell grade_id, code that redefines one answer wrongly)};
- ALTERNATIVES (optional): {description: (test cell grade_id, another correct answer)};
- ALSO_FAILS (optional): {mistake description: (other test cells it may also fail, why no test
  can avoid that)}: the few mistakes that leave a later exercise nothing to run (each must say why).
"""
