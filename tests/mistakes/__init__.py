"""Per-lesson data for tests/test_mistakes.py: one module `lessonNN.py` per lesson, each with

- LESSON: the lesson id (the notebook's stem);
- MISTAKES: {description: (test cell grade_id, code that redefines one answer wrongly)};
- ALTERNATIVES (optional): {description: (test cell grade_id, another correct answer)}.
"""
